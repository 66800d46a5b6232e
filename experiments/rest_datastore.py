"""Build REST's datastore for one model's tokenizer: the documents of a JSONL corpus (one {"text": ...} per
line; default: the shipped goose/data/rest/mbpp_nontest.jsonl) tokenized without special tokens, written as
`<out>/<corpus>.<model>.npy` (int32, documents joined by −1) with a `.json` beside it saying what it holds.
`method=rest` then finds it by the name `<corpus>.<model>` (conf/method/rest.yaml).

    python -m experiments.rest_datastore --model smollm2-135m                  # into $GOOSE_CACHE/rest/
    python -m experiments.rest_datastore --model gemma3-270m --corpus my.jsonl --out DIR
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path
from typing import Any

from transformers import AutoTokenizer

from goose.harness.compose import compose_config
from goose.harness.models.gguf import gguf_cache_dir, locate_gguf
from goose.sources.suffix_array import SHIPPED_DIR, TokenDatastore, cache_dir

DEFAULT_CORPUS = SHIPPED_DIR / "mbpp_nontest.jsonl"


def load_tokenizer(model: str) -> Any:
    """The tokenizer of conf/model/<model>.yaml, without loading its weights."""
    spec = compose_config([f"model={model}"], validate=False).model
    if spec.get("source") == "gguf":
        path = locate_gguf(spec.gguf_package, spec.gguf_file)
        cached = gguf_cache_dir(spec.name, path)
        if cached.is_dir():
            return AutoTokenizer.from_pretrained(cached)
        return AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    return AutoTokenizer.from_pretrained(spec.get("tokenizer") or spec.hf_id)


def build(model: str, corpus: Path, out: Path) -> Path:
    """Tokenize `corpus` with `model`'s tokenizer and write the datastore; returns the .npy path."""
    tokenizer = load_tokenizer(model)
    texts = [json.loads(line)["text"] for line in corpus.read_text().splitlines() if line.strip()]
    store = TokenDatastore.from_documents(tokenizer.encode(t, add_special_tokens=False) for t in texts)
    out.mkdir(parents=True, exist_ok=True)
    target = out / f"{corpus.stem}.{model}.npy"
    store.save(target)
    about = {
        "corpus": corpus.name,
        "corpus_sha256": hashlib.sha256(corpus.read_bytes()).hexdigest(),
        "model": model,
        "tokenizer": type(tokenizer).__name__,
        "documents": len(texts),
        "tokens": int((store.tokens >= 0).sum()),
    }
    target.with_suffix(".json").write_text(json.dumps(about, indent=1) + "\n")
    return target


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", required=True, help="a conf/model name, e.g. smollm2-135m")
    parser.add_argument(
        "--corpus", type=Path, default=DEFAULT_CORPUS, help="JSONL, one {'text': ...} per line"
    )
    parser.add_argument("--out", type=Path, default=None, help="folder (default: $GOOSE_CACHE/rest)")
    args = parser.parse_args(argv)
    target = build(args.model, args.corpus, args.out or cache_dir())
    print(f"wrote {target} ({json.loads(target.with_suffix('.json').read_text())['tokens']} tokens)")


if __name__ == "__main__":
    main()
