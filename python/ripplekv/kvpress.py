"""RippleKV budget maps inside kvpress (docs/PYTHON.md, "Budget maps in kvpress").

    from ripplekv.kvpress import press_from_map
    press = press_from_map("map.json", selector="snapkv", window=64)
    pipe = pipeline("kv-press-text-generation", model=model, tokenizer=tokenizer)
    answer = pipe(context, question=question, press=press)["answer"]

`MapPress` is a kvpress press that keeps, after prefill, exactly the map's tokens in every layer
(and every KV head of a per-head map), chosen by a kvpress scorer (SnapKV's window attention,
StreamingLLM's sinks and recent tokens, or any ScorerPress). It works under every attention
kvpress patches:

- flash attention ("evict"): each layer's cache is cut to its own budget (a per-head map: to the
  layer's largest head budget, the other heads' extra positions masked), so the cache holds the
  map's memory;
- sdpa, the attention transformers uses on CPU and without flash-attn ("mask"): transformers
  builds one attention mask from layer 0's cache length, so layers of different lengths crash it
  (kvpress's PerLayerCompressionPress does). Every layer is cut to the map's largest budget and
  the positions beyond each layer's (or head's) own budget are masked with kvpress's
  `masked_key_indices` mechanism (the one its AdaKVPress uses: those keys are replaced by a key
  whose attention weight underflows to zero). Attention then sees exactly the map's tokens; the
  memory held is the largest budget times the layers, not the map's sum.

Eager attention is refused (kvpress cannot mask it). Importing this module imports torch,
transformers and kvpress; `ripplekv.maps` reads and checks maps without them.
"""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass, field
from typing import Any, Optional, Union

import torch
from kvpress import BasePress, ScorerPress, SnapKVPress
from torch import nn

from ripplekv.maps import Budgets, MapError, MapSource, apply_floor, load_map, recorded_window

__all__ = ["MapPress", "RecencyScorer", "press_from_map", "scorer_for", "visible_tokens"]

#: kvpress's SnapKV observation window (SnapKVPress's default).
KVPRESS_SNAPKV_WINDOW = 64


@dataclass
class RecencyScorer(ScorerPress):
    """StreamingLLM's choice as scores: the first `n_sink` tokens, then the most recent ones.

    kvpress's StreamingLLMPress derives its scores from its own compression ratio; a map gives
    every layer (and head) its own count, so the order is what is needed: sinks above everything,
    then newer above older.
    """

    n_sink: int = 4

    def score(self, module: nn.Module, hidden_states: torch.Tensor, keys: torch.Tensor,
              values: torch.Tensor, attentions: torch.Tensor, kwargs: dict) -> torch.Tensor:
        bsz, heads, k_len, _ = keys.shape
        scores = torch.arange(k_len, dtype=torch.float32, device=keys.device)
        scores[: self.n_sink] = k_len + 1
        return scores.expand(bsz, heads, k_len)


def scorer_for(selector: Union[str, ScorerPress], window: int = KVPRESS_SNAPKV_WINDOW,
               sinks: int = 4) -> "tuple[ScorerPress, int]":
    """The kvpress scorer of `selector` and the smallest budget it needs (its floor).

    "snapkv": SnapKVPress(window_size=window), floor `window` (its window is always kept, so a
    smaller budget would keep an arbitrary part of the window); "streaming": RecencyScorer(sinks),
    floor `sinks`; a ScorerPress instance: itself, floor its `window_size` when it has one, else 1.
    "h2o" is refused: kvpress has no H2O scorer (ObservedAttentionPress needs eager attention).
    """
    if isinstance(selector, ScorerPress):
        return selector, int(getattr(selector, "window_size", 1) or 1)
    if selector == "snapkv":
        return SnapKVPress(window_size=window), window
    if selector == "streaming":
        return RecencyScorer(n_sink=sinks), sinks
    if selector == "h2o":
        raise MapError("kvpress 0.5 has no H2O scorer (its ObservedAttentionPress needs eager "
                       "attention, which kvpress cannot mask); use snapkv or pass a ScorerPress")
    raise MapError(f"unknown selector {selector!r}: snapkv, streaming or a kvpress ScorerPress")


@dataclass
class MapPress(BasePress):
    """Keeps the map's tokens per layer (and per KV head) after prefill; see the module comment.

    budgets: the map (after its floor); scorer: ranks a layer's positions per KV head; floor and
    floor_rule: what `update` applies to a new map (ripplekv.maps.apply_floor); mode: "auto"
    (flash attention evicts, other attention masks), "mask" (always the common length and masks)
    or "evict" (every layer its own length: flash attention only).

    `update(source)` swaps the map of a running process (ripplekv.reload): the new map is read and
    checked first, so a bad one leaves the old in place; a prefill already under way finishes with
    the map it started with (the map is taken once per prefill, at its first layer).
    `update(None)` stops compressing until the next map.
    """

    budgets: Optional[Budgets]
    scorer: ScorerPress
    floor: int = 1
    floor_rule: str = "refuse"
    mode: str = "auto"
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    _shape: Optional["tuple[int, int]"] = field(default=None, repr=False, compare=False)
    _prefill_map: Optional[Budgets] = field(default=None, repr=False, compare=False)
    _evict: bool = field(default=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.mode not in ("auto", "mask", "evict"):
            raise ValueError(f"mode must be auto, mask or evict, got {self.mode!r}")

    # -- the map ------------------------------------------------------------------------------

    def update(self, source: Optional[MapSource]) -> Optional[Budgets]:
        """Replace the map by `source` (checked as at construction) or, with None, by none."""
        new = None
        if source is not None:
            new = apply_floor(load_map(source), self.floor, self.floor_rule)
            if self._shape is not None:
                new.check_shape(*self._shape)
        with self._lock:
            self.budgets = new
        return new

    def current(self) -> Optional[Budgets]:
        with self._lock:
            return self.budgets

    # -- kvpress hooks ------------------------------------------------------------------------

    def post_init_from_model(self, model: Any) -> None:
        config = model.config
        layers = config.num_hidden_layers
        kv_heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
        budgets = self.current()
        if budgets is not None:
            budgets.check_shape(layers, kv_heads)
        self._shape = (layers, kv_heads)
        attention = str(getattr(config, "_attn_implementation", "") or "")
        if attention == "eager":
            raise MapError("MapPress needs sdpa or flash attention: kvpress cannot mask eager "
                           "attention (load the model with attn_implementation='sdpa')")
        flash = attention.startswith("flash") or attention.startswith("kernels-community/flash")
        if self.mode == "evict" and not flash:
            raise MapError(f"mode 'evict' needs flash attention (the model uses {attention}): "
                           "transformers masks every layer with layer 0's cache length; use "
                           "mode 'auto' or 'mask'")
        self._evict = self.mode == "evict" or (self.mode == "auto" and flash)
        self.scorer.post_init_from_model(model)

    def forward_hook(self, module: nn.Module, input: Any, kwargs: dict, output: Any) -> Any:
        if module.layer_idx == 0:
            self._prefill_map = self.current()
        return super().forward_hook(module, input, kwargs, output)

    def _kept_length(self, budgets: Budgets, layer: int, kv_heads: int, k_len: int) -> int:
        """Positions layer keeps in its cache: its largest head budget (evict) or, so that every
        layer has one length, the largest budget of the whole map (mask); at most k_len."""
        if self._evict:
            return min(k_len, max(budgets.head_budgets(layer, kv_heads)))
        return min(k_len, budgets.largest)

    def compress(self, module: nn.Module, hidden_states: torch.Tensor, keys: torch.Tensor,
                 values: torch.Tensor, attentions: torch.Tensor,
                 kwargs: dict) -> "tuple[torch.Tensor, torch.Tensor]":
        budgets = self._prefill_map
        module.masked_key_indices = None
        if budgets is None:
            return keys, values
        bsz, kv_heads, k_len, head_dim = keys.shape
        layer = module.layer_idx
        wanted = [min(b, k_len) for b in budgets.head_budgets(layer, kv_heads)]
        kept = self._kept_length(budgets, layer, kv_heads, k_len)
        if kept == k_len and min(wanted) == k_len:
            return keys, values
        scores = self.scorer.score(module, hidden_states, keys, values, attentions, kwargs)
        # Best first: head h's budget is the first wanted[h] of its kept positions; the rest of
        # them are masked.
        order = scores.topk(kept, dim=-1).indices
        gather = order.unsqueeze(-1).expand(-1, -1, -1, head_dim)
        keys = keys.gather(2, gather).contiguous()
        values = values.gather(2, gather).contiguous()
        masked = [(h, p) for h, w in enumerate(wanted) for p in range(w, kept)]
        if masked:
            heads = torch.tensor([h for h, _ in masked], dtype=torch.long)
            positions = torch.tensor([p for _, p in masked], dtype=torch.long)
            module.masked_key_indices = (
                torch.arange(bsz).repeat_interleave(len(masked)),
                heads.repeat(bsz), positions.repeat(bsz))
        return keys, values


def press_from_map(source: MapSource, selector: Union[str, ScorerPress, None] = None,
                   window: Optional[int] = None, sinks: int = 4, floor: str = "refuse",
                   mode: str = "auto") -> MapPress:
    """A kvpress press that applies a RippleKV map (a file, a parsed document, a BudgetMap or a
    stored MapVersion; ripplekv.maps.load_map).

    selector: "snapkv" (default, or what a frozen version's selection intent records),
    "streaming" or a kvpress ScorerPress. window: SnapKV's observation window (default the version's
    recorded `window`, else kvpress's 64). floor: what to do with layers (or heads) below the
    selector's floor, "refuse" (MapError naming them) or "raise" (lifted to the floor, the tokens
    taken from the layers above it in proportion to their excess; the total is kept). mode:
    MapPress's. A version recorded for another selector than the one given is used with a
    warning.
    """
    budgets = load_map(source)
    recorded = str(dict(budgets.selection).get("method") or "")
    if selector is None:
        selector = recorded if recorded in ("snapkv", "streaming") else "snapkv"
    elif recorded and isinstance(selector, str) and selector != recorded:
        warnings.warn(f"{budgets.source} was frozen for {recorded}, applied with {selector}",
                      stacklevel=2)
    if window is None:
        window = recorded_window(budgets) or KVPRESS_SNAPKV_WINDOW
    scorer, needs = scorer_for(selector, window=window, sinks=sinks)
    return MapPress(budgets=apply_floor(budgets, needs, floor), scorer=scorer, floor=needs,
                    floor_rule=floor, mode=mode)


def visible_tokens(model: Any, cache: Any) -> "list[int]":
    """Per layer, the cached positions attention sees after a prefill: the cache's length less
    the positions a MapPress masked, averaged over KV heads and rounded down (for a per-layer map,
    exactly the layer's budget)."""
    language_model = model.model.language_model if hasattr(model.model, "language_model") \
        else model.model
    out = []
    for layer, block in enumerate(language_model.layers):
        keys = cache.layers[layer].keys
        rows = keys.shape[0] * keys.shape[1]
        masked = getattr(block.self_attn, "masked_key_indices", None)
        hidden = 0 if masked is None else int(masked[0].numel())
        out.append((rows * keys.shape[-2] - hidden) // rows)
    return out
