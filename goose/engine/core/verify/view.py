"""The tree as the sampled-draft verifiers see it after the forward: tokens, parents, each node's acceptable
children in draw order, the proposal q_u its children were drawn from (DraftTree.proposals), the target p_u
as a sparse `Dist`, and the i.i.d. paths when the draft has them (DraftTree.paths).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from goose.engine.core.verify.inputs import Dist, RejectionInputs, normalised


@dataclass
class SampledTree:
    """One verification step's tree for the host walk (node 0 = the anchor)."""

    tokens: Sequence[int]
    parents: Sequence[int]
    children: list[list[int]]
    proposals: Sequence[tuple[tuple[int, ...], tuple[float, ...]] | None]
    target: list[Dist]
    paths: list[tuple[int, ...]] | None = None

    @classmethod
    def from_inputs(
        cls,
        tokens: Sequence[int],
        parents: Sequence[int],
        children: list[list[int]],
        proposals: Sequence[object],
        inputs: RejectionInputs,
        paths: list[tuple[int, ...]] | None = None,
    ) -> SampledTree:
        target = [Dist.target(c, p) for c, p in zip(inputs.candidates, inputs.p, strict=True)]
        return cls(tokens, parents, children, proposals, target, paths)  # type: ignore[arg-type]

    def q(self, u: int) -> dict[int, float]:
        """q_u normalised; a node without a proposal drew its one child deterministically (q = δ)."""
        proposal = self.proposals[u]
        if proposal is None:
            return {self.tokens[c]: 1.0 for c in self.children[u][:1]}
        return normalised(dict(zip(proposal[0], proposal[1], strict=True)))

    def path_to(self, v: int) -> list[int]:
        path = [v]
        while path[-1] != 0:
            path.append(self.parents[path[-1]])
        return path[::-1]

    def is_chain(self) -> bool:
        return all(len(kids) <= 1 for kids in self.children)

    def raw_draws(self) -> list[list[int]]:
        """Per node, its children as the i.i.d. draws that made them, with repeats, in draw order: one draw per
        path through the node (the paths' branching point and below), else its children once each."""
        draws = [list(kids) for kids in self.children]
        if not self.paths:
            return draws
        acceptable = {c for kids in self.children for c in kids}
        covered: dict[int, list[int]] = {}
        for path in self.paths:
            steps = [n for n in path if n in acceptable]
            parent = self.parents[steps[0]] if steps else None
            for node in steps:
                covered.setdefault(parent, []).append(node)
                parent = node
        for node, seq in covered.items():
            draws[node] = seq
        return draws

    def branch_point(self) -> int | None:
        """The node the i.i.d. paths start under (the anchor for K i.i.d. paths; the trunk's end when delayed);
        None without paths (or when a depth cut left none of their nodes)."""
        first = [path[0] for path in self.paths or () if path]
        return self.parents[first[0]] if first else None

    def num_paths(self) -> int:
        """K: the paths that kept a node."""
        return sum(1 for path in self.paths or () if path) or 1


def chain_nodes(tree: SampledTree) -> list[int]:
    """The nodes of a chain, root first (ValueError if some node has two children)."""
    if not tree.is_chain():
        raise ValueError("Block Verification needs a chain (every node at most one child): draft shape chain")
    nodes = [0]
    while tree.children[nodes[-1]]:
        nodes.append(tree.children[nodes[-1]][0])
    return nodes


def restrict_paths(tree: SampledTree, k: int, length: int) -> SampledTree:
    """The tree of a smaller draft of the same shape inside `tree`: its trunk, then the first `k` of its i.i.d.
    paths, each cut to its first `length` draws (a (K, L1, L2)-delayed tree gives the (k, L1, length) one for
    k ≤ K, length ≤ L2; arXiv 2602.16994 Def. 5.2). The first k of K i.i.d. paths are k i.i.d. paths and a
    path's first draws are a shorter path, so a verifier's exact law on the result is its law on a draft of
    that shape; each node keeps its q and p, a node left without children its proposal dropped (no draw
    was made at it). Needs the paths (ValueError without them)."""
    if tree.paths is None:
        raise ValueError("restrict_paths needs a draft of i.i.d. paths (DraftTree.paths)")
    branch = tree.branch_point()
    keep = set(tree.path_to(branch)) if branch is not None else set(range(len(tree.tokens)))
    paths = [tuple(path[:length]) for path in tree.paths[:k]]
    for path in paths:
        keep.update(path)
    order = sorted(keep)  # parents come before their children
    index = {old: new for new, old in enumerate(order)}
    children = [[index[c] for c in tree.children[u] if c in keep] for u in order]
    return SampledTree(
        tokens=[tree.tokens[u] for u in order],
        parents=[index[tree.parents[u]] if u > 0 else -1 for u in order],
        children=children,
        proposals=[tree.proposals[u] if kids else None for u, kids in zip(order, children, strict=True)],
        target=[tree.target[u] for u in order],
        paths=[tuple(index[n] for n in path) for path in paths],
    )
