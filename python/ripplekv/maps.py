"""Budget maps as a serving process reads them: where they come from, and the selector's floor.

A map gives every layer (and, for a per-head map, every KV head of a layer) the number of tokens
its KV cache keeps after prefill (docs/BUDGETS.md). `load_map` reads one from any of the forms
RippleKV hands out; `apply_floor` enforces the smallest budget a KV selector needs. Neither
imports torch: `ripplekv.kvpress` applies the result inside kvpress, and `ripplekv.reload`
validates a map in an apply hook before a running process takes it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ripplekv.types import BudgetMap, MapVersion

MapSource = Union[str, "os.PathLike[str]", Mapping[str, Any], BudgetMap, MapVersion, "Budgets"]

#: The largest map file read (a 1000-layer per-head map is far below it).
MAX_MAP_FILE_BYTES = 16 << 20


class MapError(ValueError):
    """A map that cannot be used: malformed, for another model shape, or below the floor."""


@dataclass(frozen=True)
class Budgets:
    """Tokens kept per layer after prefill, and per KV head for a per-head map.

    `tokens[l]` is layer l's budget; `head_tokens[l][h]` the budget of its KV head h (empty for a
    per-layer map). `selection` is the selection intent the map was frozen with (`{"method":
    "snapkv", "params": {"window": "64"}}`; empty when the source records none), `min_tokens` the
    map's own floor (`params.min_tokens`; 1 when not recorded), and `source` says where it came
    from, for messages.
    """

    tokens: Tuple[int, ...]
    head_tokens: Tuple[Tuple[int, ...], ...] = ()
    model_hash: str = ""
    version: str = ""
    selection: Mapping[str, Any] = field(default_factory=dict)
    min_tokens: int = 1
    source: str = "map"

    @property
    def per_head(self) -> bool:
        return bool(self.head_tokens)

    @property
    def total_tokens(self) -> int:
        """Tokens over all layers: L * average for a per-layer map, H * L * average per head."""
        if self.per_head:
            return sum(sum(h) for h in self.head_tokens)
        return sum(self.tokens)

    @property
    def largest(self) -> int:
        """The largest budget of the map: of any head for a per-head map, else of any layer."""
        if self.per_head:
            return max(max(h) for h in self.head_tokens)
        return max(self.tokens)

    def head_budgets(self, layer: int, kv_heads: int) -> Tuple[int, ...]:
        """Budget of each of layer's `kv_heads` heads (every head the layer's for a per-layer map)."""
        if self.per_head:
            return self.head_tokens[layer]
        return (self.tokens[layer],) * kv_heads

    def check_shape(self, layers: int, kv_heads: int) -> None:
        """MapError unless the map has `layers` layers and, per head, `kv_heads` heads each."""
        if len(self.tokens) != layers:
            raise MapError(f"{self.source}: the map has {len(self.tokens)} layers, the model "
                           f"{layers}")
        if self.per_head and any(len(h) != kv_heads for h in self.head_tokens):
            found = sorted({len(h) for h in self.head_tokens})
            raise MapError(f"{self.source}: the per-head map has {found} heads per layer, the "
                           f"model {kv_heads} KV heads")


def _positive_int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise MapError(f"{where} must be a positive integer, got {value!r}")
    return value


def _from_native(doc: Mapping[str, Any], source: str, **extra: Any) -> Budgets:
    """The budgets of a native map document (docs/BUDGETS.md, section 3)."""
    layers = doc.get("layers")
    if not isinstance(layers, list) or not layers:
        raise MapError(f"{source}: field \"layers\" must be a non-empty list")
    tokens: List[int] = []
    heads: List[Tuple[int, ...]] = []
    for i, layer in enumerate(layers):
        where = f"{source}: layers[{i}]"
        if not isinstance(layer, Mapping):
            raise MapError(f"{where} must be an object")
        if layer.get("layer", i) != i:
            raise MapError(f"{where}.layer is {layer.get('layer')!r}, expected {i}")
        tokens.append(_positive_int(layer.get("tokens"), f"{where}.tokens"))
        if "head_tokens" in layer:
            per = layer["head_tokens"]
            if not isinstance(per, list) or not per:
                raise MapError(f"{where}.head_tokens must be a non-empty list")
            heads.append(tuple(_positive_int(t, f"{where}.head_tokens[{h}]")
                               for h, t in enumerate(per)))
    if heads and len(heads) != len(tokens):
        raise MapError(f"{source}: only {len(heads)} of {len(tokens)} layers have head_tokens")
    if heads and len({len(h) for h in heads}) != 1:
        raise MapError(f"{source}: layers have different numbers of head_tokens")
    total = doc.get("total_tokens")
    if total is not None and total != sum(tokens):
        raise MapError(f"{source}: total_tokens is {total}, the layers sum to {sum(tokens)}")
    params = doc.get("params") if isinstance(doc.get("params"), Mapping) else {}
    min_tokens = params.get("min_tokens") or 1
    return Budgets(tokens=tuple(tokens), head_tokens=tuple(heads),
                   model_hash=str(doc.get("model_hash", "")), min_tokens=int(min_tokens),
                   source=source, **extra)


def _from_document(doc: Mapping[str, Any], source: str) -> Budgets:
    """A native map, or a frozen map document (`{"map": native, "selection": ...}`)."""
    if "map" in doc:
        inner = doc["map"]
        if not isinstance(inner, Mapping):
            raise MapError(f"{source}: field \"map\" must be an object")
        selection = doc.get("selection") or {}
        return _from_native(inner, source, selection=dict(selection))
    if "compression_ratios" in doc:
        raise MapError(f"{source}: a kvpress export holds ratios relative to one context length; "
                       "give the native map (ripplekv budgets --format native, or map get "
                       "--format native)")
    return _from_native(doc, source)


def load_map(source: MapSource) -> Budgets:
    """The budgets of `source`:

    - a path to a native map file (`ripplekv budgets -o`, or what an agent writes with
      `--format native`) or to a frozen map document (`ripplekv map get --format document`);
    - the same already parsed (a dict);
    - a `ripplekv.BudgetMap` (`Client.budget_map`) or a `ripplekv.MapVersion` (`Client.
      get_map_version`: a stored version, with its selection intent);
    - a `Budgets` (returned as is).

    MapError names the source and the field for anything malformed.
    """
    if isinstance(source, Budgets):
        return source
    if isinstance(source, MapVersion):
        if not source.document:
            raise MapError(f"map version {source.version} has no document (listings omit it; "
                           "use Client.get_map_version)")
        b = _from_document(json.loads(source.document), f"map version {source.version}")
        return replace(b, version=source.version, model_hash=source.model_hash)
    if isinstance(source, BudgetMap):
        heads = tuple(tuple(h) for h in source.head_tokens)
        return Budgets(tokens=tuple(source.tokens), head_tokens=heads,
                       model_hash=source.model_hash,
                       source=f"budget map of profile {source.profile_version}")
    if isinstance(source, Mapping):
        return _from_document(source, "map")
    path = Path(source)
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_MAP_FILE_BYTES + 1)
    except OSError as e:
        raise MapError(f"{path}: {e.strerror}") from e
    if len(data) > MAX_MAP_FILE_BYTES:
        raise MapError(f"{path}: larger than {MAX_MAP_FILE_BYTES} bytes")
    try:
        doc = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise MapError(f"{path}: not JSON: {e}") from e
    if not isinstance(doc, Mapping):
        raise MapError(f"{path}: not a JSON object")
    return _from_document(doc, str(path))


def _raise_to_floor(values: Sequence[int], floor: int) -> List[int]:
    """`values` with every entry below `floor` raised to it and the tokens that took taken from
    the entries above it in proportion to their excess over the floor (largest remainder, ties
    to the lower index), so the sum is unchanged. Precondition: sum(values) >= floor * len."""
    out = [max(v, floor) for v in values]
    need = sum(out) - sum(values)
    if need == 0:
        return out
    excess = [v - floor for v in values]
    pool = sum(e for e in excess if e > 0)
    # Each entry above the floor gives need * excess / pool, floored; the remainder goes to the
    # largest fractional parts. No entry goes below the floor since its share <= its excess.
    shares = [need * e // pool if e > 0 else 0 for e in excess]
    left = need - sum(shares)
    order = sorted((i for i, e in enumerate(excess) if e > 0),
                   key=lambda i: (-(need * excess[i] % pool), i))
    for i in order[:left]:
        shares[i] += 1
    return [o - s for o, s in zip(out, shares)]


def apply_floor(budgets: Budgets, floor: int, rule: str = "refuse") -> Budgets:
    """The map with no layer (or head) below `floor`, the smallest budget the selector needs.

    rule "refuse": MapError listing every layer (or head) below the floor and how to get a map
    that respects it. rule "raise": those entries are raised to the floor and the tokens taken
    from the entries above it in proportion to their excess over the floor (largest remainder),
    so the total, and so the memory, is unchanged; MapError when the total cannot give every
    entry the floor. A map already at or above the floor is returned unchanged either way.
    """
    if rule not in ("refuse", "raise"):
        raise ValueError(f"floor rule must be 'refuse' or 'raise', got {rule!r}")
    if budgets.per_head:
        flat = [t for layer in budgets.head_tokens for t in layer]
        names = [f"layer {l} head {h} ({t})" for l, layer in enumerate(budgets.head_tokens)
                 for h, t in enumerate(layer) if t < floor]
    else:
        flat = list(budgets.tokens)
        names = [f"layer {l} ({t})" for l, t in enumerate(budgets.tokens) if t < floor]
    if not names:
        return budgets
    if rule == "refuse":
        shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
        raise MapError(
            f"{budgets.source}: {len(names)} of {len(flat)} budgets are below the selector's "
            f"floor of {floor} tokens: {shown}; make the map with ripplekv budgets --selection "
            f"snapkv --window {floor} (or the selector's flag), or pass floor='raise'")
    if sum(flat) < floor * len(flat):
        raise MapError(f"{budgets.source}: {sum(flat)} tokens cannot give {len(flat)} budgets "
                       f"the floor of {floor} each")
    raised = _raise_to_floor(flat, floor)
    if not budgets.per_head:
        return replace(budgets, tokens=tuple(raised), min_tokens=floor)
    heads = len(budgets.head_tokens[0])
    per = tuple(tuple(raised[l * heads:(l + 1) * heads]) for l in range(len(budgets.tokens)))
    # A layer's tokens stay its heads' mean, apportioned so the layers keep their sum.
    return replace(budgets, head_tokens=per, tokens=_layer_means(per, sum(budgets.tokens)),
                   min_tokens=floor)


def _layer_means(heads: Sequence[Sequence[int]], total: int) -> Tuple[int, ...]:
    """Each layer's mean head budget, floored, plus one token to the largest remainders until
    the layers sum to `total` (the rule of native per-head maps, docs/BUDGETS.md)."""
    h = len(heads[0])
    base = [sum(layer) // h for layer in heads]
    left = total - sum(base)
    order = sorted(range(len(heads)), key=lambda l: (-(sum(heads[l]) % h), l))
    for l in order[:max(0, left)]:
        base[l] += 1
    return tuple(base)


def recorded_window(budgets: Budgets) -> Optional[int]:
    """The selector window the map was frozen for (`selection.params.window`), if recorded."""
    params: Dict[str, Any] = dict(budgets.selection).get("params") or {}
    window = params.get("window")
    try:
        return int(window) if window is not None else None
    except ValueError:
        return None
