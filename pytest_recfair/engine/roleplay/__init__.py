"""The role-play audit (BiasLens): does the model become biased when it plays a role?"""

from pytest_recfair.engine.roleplay.kind import ROLEPLAY, RoleplayAudit

__all__ = ["ROLEPLAY", "RoleplayAudit"]
