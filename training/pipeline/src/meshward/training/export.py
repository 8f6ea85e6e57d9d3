"""Export a fine-tuned classifier to ONNX: fp32 (opset 17, legacy TorchScript exporter), int8 dynamic
quantisation for CPU, fp16 for GPU. Inputs ``input_ids`` / ``attention_mask`` (int64, dynamic batch and
sequence), output ``logits`` (float32)."""
from __future__ import annotations

import hashlib
import shutil
import warnings
from pathlib import Path

import onnx
import torch

from .trainer import MeanPoolClassifier

__all__ = ["OPSET", "export_all", "file_digest"]

OPSET = 17


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _export_fp32(model: MeanPoolClassifier, path: Path) -> None:
    model.eval()
    ids = torch.tensor([[101, 7592, 2088, 102, 0, 0], [101, 2054, 2003, 1996, 3058, 102]], dtype=torch.long)
    mask = (ids != 0).long()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            (ids, mask),
            str(path),
            input_names=["input_ids", "attention_mask"],
            output_names=["logits"],
            dynamic_axes={"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"},
                          "logits": {0: "batch"}},
            opset_version=OPSET,
            do_constant_folding=True,
            dynamo=False,
        )
    onnx.checker.check_model(str(path))


def _quantize_int8(src: Path, dst: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model = onnx.load(str(src))
    del model.graph.value_info[:]  # stale shape annotations upset the quantiser (needed for dynamo exports)
    cleaned = dst.with_suffix(".prep.onnx")
    onnx.save(model, str(cleaned))
    try:
        quantize_dynamic(str(cleaned), str(dst), weight_type=QuantType.QInt8, per_channel=True)
    finally:
        cleaned.unlink(missing_ok=True)


def _convert_fp16(src: Path, dst: Path) -> None:
    from onnxruntime.transformers.float16 import convert_float_to_float16

    model = onnx.load(str(src))
    half = convert_float_to_float16(model, keep_io_types=True)
    onnx.save(half, str(dst))


def export_all(model: MeanPoolClassifier, out_dir: Path, tokenizer_file: Path) -> dict[str, dict[str, object]]:
    """Write model.fp32.onnx, model.int8.onnx, model.fp16.onnx and tokenizer.json; returns file facts."""
    out_dir.mkdir(parents=True, exist_ok=True)
    fp32 = out_dir / "model.fp32.onnx"
    _export_fp32(model, fp32)
    _quantize_int8(fp32, out_dir / "model.int8.onnx")
    _convert_fp16(fp32, out_dir / "model.fp16.onnx")
    shutil.copyfile(tokenizer_file, out_dir / "tokenizer.json")
    files = {}
    for name in ("model.int8.onnx", "model.fp16.onnx", "model.fp32.onnx", "tokenizer.json"):
        path = out_dir / name
        files[name] = {"bytes": path.stat().st_size, "sha256": file_digest(path)}
    return files
