"""Who may hold how much of the console's bounded things (live event streams, sessions,
connections of signed-in people): a share per role and a cap per account.

One account signed in many times, or every account of one role together, can fill only its own
role's share: the floor's share stays free for the floor, so a dealer's screens (or a dealer's
stolen password) can never keep the floor from signing in and seeing the alarms. Within a role,
one account holds at most ``per_account``, so one person cannot keep their colleagues out either.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

from controller.actions import ROLES


def role_share(total: int) -> int:
    """Each role's share of ``total``: an equal part (the floor's is never the dealers')."""
    return max(1, total // len(ROLES))


@dataclass
class Shares:
    """Live holdings counted per account and per role, against ``per_account`` and each role's
    share of ``total``."""

    total: int
    per_account: int
    by_account: collections.Counter[str] = field(default_factory=collections.Counter)
    by_role: collections.Counter[str] = field(default_factory=collections.Counter)

    def refusal(self, account: str, role: str) -> str | None:
        """Why ``account`` (of ``role``) may not take one more now; None when it may."""
        if self.by_account[account] >= self.per_account:
            return f"at most {self.per_account} for one person"
        if self.by_role[role] >= role_share(self.total):
            return f"the {role} role's share ({role_share(self.total)}) is in use"
        return None

    def take(self, account: str, role: str) -> str | None:
        """One more for ``account``, counted; or why not (nothing counted)."""
        why = self.refusal(account, role)
        if why is None:
            self.by_account[account] += 1
            self.by_role[role] += 1
        return why

    def give_back(self, account: str, role: str) -> None:
        for counter, key in ((self.by_account, account), (self.by_role, role)):
            counter[key] -= 1
            if counter[key] <= 0:
                del counter[key]
