"""Search strategies: which attempts the next round proposes from.

A strategy is a small class with declared options (defaults in `OPTIONS`; an unknown key is an error that
names the known ones, Kernel Tuner style) and two methods the search calls:
- `parents(state, width)`: up to `width` parents for the next proposals (None: the original kernel);
- `observe(attempt, reward)`: one evaluated attempt and its reward (its speedup over the original when
  verified, 0 otherwise).
Acceptance is not the strategy's business: the search accepts only what the evaluator calls faster.
"""
from __future__ import annotations

import abc

import math
from dataclasses import dataclass, field

from ..errors import MepgenError
from .proposer import Attempt


@dataclass
class State:
    """What a strategy may look at: every attempt so far, by id, and which are verified."""
    attempts: dict[str, Attempt] = field(default_factory=dict)

    def verified(self) -> list[Attempt]:
        return [a for a in self.attempts.values() if a.ok and getattr(a.result, "timed", None) is not None]


def median(a: Attempt) -> float:
    return a.result.timed.median_ms


def lineage(a: Attempt) -> str:
    """What kind of change an attempt is: its transformations' names, else its proposer."""
    names = [t.get("name", "") for t in a.proposal.transformations]
    return "+".join(sorted(set(names))) if names else a.proposal.source


class Strategy(abc.ABC):
    """A way of choosing which attempts the next round builds on; subclasses declare their OPTIONS."""
    name = ""
    OPTIONS: dict = {}

    def __init__(self, **options):
        unknown = sorted(set(options) - set(self.OPTIONS))
        if unknown:
            raise MepgenError(f"strategy {self.name}: unknown option(s) {', '.join(unknown)} "
                              f"(known: {', '.join(sorted(self.OPTIONS))})")
        self.options = {**self.OPTIONS, **options}

    @abc.abstractmethod
    def parents(self, state: State, width: int) -> list[Attempt | None]:
        """Up to `width` parents for the next round (None: the original kernel)."""

    def observe(self, attempt: Attempt, reward: float) -> None:
        pass

    def likely_parents(self, state: State, width: int) -> list[Attempt | None]:
        """The parents `parents` would choose next from `state`, changing nothing (lookahead.py compiles their
        proposals ahead); [] where the strategy cannot say without choosing."""
        return []


class Elite(Strategy):
    """Best-first with diverse elites: the fastest verified attempt, then the fastest of other lineages,
    then the original while it still yields proposals."""
    name = "elite"
    OPTIONS = {"elites": 3, "original_rounds": 1}

    def __init__(self, **options):
        super().__init__(**options)
        self.rounds = 0

    def parents(self, state: State, width: int) -> list[Attempt | None]:
        self.rounds += 1
        return self._choose(state, width, self.rounds)

    def likely_parents(self, state: State, width: int) -> list[Attempt | None]:
        return self._choose(state, width, self.rounds + 1)

    def _choose(self, state: State, width: int, round_no: int) -> list[Attempt | None]:
        ranked = sorted((a for a in state.verified() if a.result.faster), key=median)
        chosen: list[Attempt | None] = []
        kinds: set[str] = set()
        for a in ranked:                               # best, then diverse lineages
            if len(chosen) >= min(width, self.options["elites"]):
                break
            if not chosen or lineage(a) not in kinds:
                chosen.append(a)
                kinds.add(lineage(a))
        for a in ranked:                               # fill with the next best
            if len(chosen) >= min(width, self.options["elites"]):
                break
            if a not in chosen:
                chosen.append(a)
        if round_no <= self.options["original_rounds"] or len(chosen) < width:
            chosen.append(None)
        return chosen[:max(width, 1)]


@dataclass
class Node:
    attempt: Attempt | None
    parent: "Node | None" = None
    children: list["Node"] = field(default_factory=list)
    visits: int = 0
    reward: float = 0.0
    expansions: int = 0           # proposal requests made from this node
    exhausted: bool = False       # its proposer had nothing new


class MCTS(Strategy):
    """Monte Carlo tree search over edits (OptiML-style): nodes are attempts, the root the original.

    Selection descends by UCT (mean reward + c * sqrt(ln N / n)); a node is expanded (a new proposal is
    asked from it) while it has fewer than `max_children` proposals, widening progressively; the reward
    of an evaluated attempt (its speedup, 0 when it failed) is backed up to the root. Several leaves per
    round are chosen with a virtual loss so they differ."""
    name = "mcts"
    OPTIONS = {"c": 1.4, "max_children": 4, "virtual_loss": 1.0}

    def __init__(self, **options):
        super().__init__(**options)
        self.root = Node(None)
        self.nodes: dict[str, Node] = {}

    def _uct(self, node: Node, child: Node) -> float:
        if child.visits == 0:
            return math.inf
        return child.reward / child.visits + self.options["c"] * math.sqrt(math.log(max(node.visits, 1)) / child.visits)

    def _expandable(self, node: Node) -> bool:
        ok = node.attempt is None or node.attempt.ok
        return ok and not node.exhausted and node.expansions < self.options["max_children"]

    def _select(self) -> Node | None:
        node = self.root
        while True:
            if self._expandable(node):
                return node
            live = [c for c in node.children if c.attempt is not None and c.attempt.ok]
            if not live:
                return None
            node = max(live, key=lambda c: self._uct(node, c))

    def parents(self, state: State, width: int) -> list[Attempt | None]:
        chosen: list[Node] = []
        for _ in range(max(width, 1)):
            node = self._select()
            if node is None:
                break
            node.expansions += 1
            chosen.append(node)
            n = node                                   # virtual loss: the path looks worse for this round
            while n is not None:
                n.visits += 1
                n.reward -= self.options["virtual_loss"]
                n = n.parent
        for node in chosen:                            # undo it; the real visits come in observe()
            n = node
            while n is not None:
                n.visits -= 1
                n.reward += self.options["virtual_loss"]
                n = n.parent
        return [n.attempt for n in chosen]

    def mark_exhausted(self, parent: Attempt | None) -> None:
        node = self.root if parent is None else self.nodes.get(parent.id)
        if node is not None:
            node.exhausted = True

    def observe(self, attempt: Attempt, reward: float) -> None:
        parent_id = attempt.repair_of or attempt.parent
        parent = self.nodes.get(parent_id, self.root) if parent_id else self.root
        node = Node(attempt, parent)
        if attempt.repair_of and parent is not self.root:   # a repair replaces the failed node's place
            parent = parent.parent or self.root
            node.parent = parent
        parent.children.append(node)
        self.nodes[attempt.id] = node
        n = node
        while n is not None:
            n.visits += 1
            n.reward += reward
            n = n.parent


STRATEGIES = {"elite": Elite, "mcts": MCTS}


def make(name: str, **options) -> Strategy:
    if name not in STRATEGIES:
        raise MepgenError(f"unknown strategy {name!r} (known: {', '.join(STRATEGIES)})")
    return STRATEGIES[name](**options)
