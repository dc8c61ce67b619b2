"""`infra propose`: the cheapest pool sizes, machine models and MIG layouts that serve every declared workload
with N-1 headroom, found by a mixed-integer program and then verified by `fit` on the proposed environment.

Why a solver: machine counts, one machine model and one MIG layout per pool, and which pool serves how
many replicas are coupled choices (a layout with more 3g.40gb instances needs fewer cards for the chat
model and more for the rerankers; a cheaper machine may need a third host to survive losing one), and
the catalogue multiplies them. A MILP states them once and HiGHS proves the cheapest combination
optimal (gap 0), where a hand-made greedy rule would only be right on the cases it was written for.

The model (one integer variable per pool, candidate and workload, never one per node, so its size does
not grow with the cluster):

- Candidates per pool: every catalogue machine of the pool's kind (GPU pools: cards of a known model;
  MIG pools: MIG-capable cards) times, for MIG pools, every maximal layout infra.model.mig.placement accepts
  on that card (no instance can be added) plus the current layout, less those that add a check error
  other than the workload rules (a driver too old for the card, a quota naming an instance the layout
  lacks). Capacity per node is infra.model.kubelet's allocatable.
- Variables: n[p,k] hosts of pool p on candidate k; z[p,k] whether p uses k (at most one per pool);
  x[w,p] replicas of workload w that pool p serves.
- Constraints: every replica admitted by quota is served (sum over p of x[w,p] = replicas); per pool
  and resource, the requests fit the pool less one host: sum of x[w,p] * request <= capacity * (n - 1),
  so losing any host leaves room (N-1, conservatively per pool); a candidate that cannot hold one
  replica (too big, wrong card, no such MIG instance, too big for a NUMA node under
  single-numa-node, no disk large enough) serves none of it; replicas that need more than half a
  node in some resource get a node each; replicas with local volumes get a disk each (of that size or
  more), N-1 too; local storage classes keep the capacity their quotas promise, and all nodes keep a
  Pod CIDR block (the checks STORAGE-CAPACITY and NET-POD-CIDR stay clean).
- Objective: the monthly price of all hosts; then, at that price, as few changes as possible
  (machine or layout changes first, then hosts added or removed).

What it approximates: capacity is summed per pool (bin packing relaxed), so a proposal can be short
where pods fragment across nodes (the scheduler places them one at a time, by priority, on the
fullest node that fits). Each proposal is therefore built as an inventory and run through the checks
and `fit` with N-1; a pool whose pods do not all fit gets a cut (that candidate needs at least as many
hosts more as the unplaced pods' requests fill) and the program is solved again, until `fit` agrees.
Pools no workload can run on are left as they are.
"""

from infra.planning.propose.candidates import FIXABLE
from infra.planning.propose.reporting import render, report
from infra.planning.propose.search import Proposal, propose

__all__ = ["FIXABLE", "Proposal", "propose", "render", "report"]
