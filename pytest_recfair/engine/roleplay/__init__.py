"""The role-play audit (BiasLens): does the model become biased when it plays a role?"""
