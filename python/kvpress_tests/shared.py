"""What the kvpress suite shares: the model (loaded once per process), the CLI and its outputs.

Environment: RIPPLEKV_CLI (the `ripplekv` binary), RIPPLEKV_SMOLLM2_GGUF (the model),
RIPPLEKV_PROFILE (a SmolLM2 noise profile), RIPPLEKV_SOURCE_DIR (the repository).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Tuple

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.utils import logging as hf_logging

SOURCE_DIR = Path(os.environ.get("RIPPLEKV_SOURCE_DIR", Path(__file__).resolve().parents[2]))
GGUF = Path(os.environ["RIPPLEKV_SMOLLM2_GGUF"])


@functools.lru_cache(maxsize=None)
def model_and_tokenizer() -> Tuple[Any, Any]:
    """SmolLM2 from the GGUF the engine reads: fp32, sdpa, one thread (beside other tests)."""
    torch.set_num_threads(1)
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    model = AutoModelForCausalLM.from_pretrained(str(GGUF.parent), gguf_file=GGUF.name,
                                                 dtype=torch.float32, attn_implementation="sdpa")
    tokenizer = AutoTokenizer.from_pretrained(str(GGUF.parent), gguf_file=GGUF.name)
    return model.eval(), tokenizer


def cli(*args: str, timeout: float = 120) -> str:
    """stdout of `ripplekv ARGS`; AssertionError with its stderr when it fails."""
    result = subprocess.run([os.environ["RIPPLEKV_CLI"], *args], capture_output=True, text=True,
                            timeout=timeout, check=False)
    if result.returncode != 0:
        raise AssertionError(f"ripplekv {' '.join(args)} failed: {result.stderr}")
    return result.stdout


def budgets(*args: str, profile: str = "") -> Dict[str, Any]:
    """`ripplekv budgets --json` of `profile` (default RIPPLEKV_PROFILE) with ARGS."""
    return json.loads(cli("budgets", "--profile", profile or os.environ["RIPPLEKV_PROFILE"],
                          "--json", *args))


@functools.lru_cache(maxsize=None)
def fidelity_windows(samples: int, context_len: int, continuation: int) -> List[Dict[str, Any]]:
    """`ripplekv examples` fidelity windows of the default held-out book (test split)."""
    out = cli("examples", "--model", str(GGUF), "--tasks", "fidelity", "--samples", str(samples),
              "--context-len", str(context_len), "--continuation", str(continuation))
    return [json.loads(line) for line in out.splitlines() if line.strip()]
