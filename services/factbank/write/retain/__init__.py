"""Retain: add a fact, add many (one transaction), supersede. The write gate, redaction,
embedding and the duplicate-vs-correction decision all happen here, once, for every caller.

A near-duplicate (same bank, category and project; cosine >= NEAR, or the same normalised
text) reinforces the existing fact only when `claims.compare` says it makes the same claim.
Otherwise the new fact is stored and the response names the old ones it may supersede, so
"port 8080" followed by "port 8081" never strengthens the claim it contradicts
(docs/principles.md#corrections-do-not-reinforce).

One module per step, each public so `check` and `lifecycle` run the same steps, never a copy:
gating (the write gate and the embedding, outside any transaction), near (near-duplicates),
retired (a claim the bank retired), insert (a fact stored, reinforced or answered retired;
add, add_many, supersede) and imports (an export round-tripped, set-based). This face names
what the services call.
"""

from factbank.write.retain.imports import Restore, bound_restores, import_many
from factbank.write.retain.insert import Outcome, add, add_many, supersede

__all__ = ["Outcome", "Restore", "add", "add_many", "bound_restores", "import_many", "supersede"]
