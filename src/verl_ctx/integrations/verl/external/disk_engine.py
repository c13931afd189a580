"""``verl_ctx_disk``: a verl checkpoint engine that writes the actor's weights to a directory servers load from.

verl's checkpoint engines (naive, nccl, nixl, ...) have a send half in the actor worker and a receive half in
``CheckpointEngineWorker`` actors inside verl's own ``RolloutReplica``s, built by ``CheckpointEngineManager``
with a process group over both. Servers started outside the job are not such replicas, so the receive half
cannot reach them. The send half fits: ``ActorRolloutRefWorker.update_weights(global_steps, mode)`` hands the
engine exactly the tensors a sync would send (``engine.get_per_tensor_param()``, HF names, LoRA merged when
``model.lora.merge``), and verl builds the engine from ``rollout.checkpoint_engine`` in every actor worker.

This backend (registered on import; verl imports ``rollout.checkpoint_engine.custom_backend_module`` in each
worker) streams those tensors into safetensors shards of ``bucket_size`` bytes, on rank 0 only, under a
temporary name, then renames the directory to ``weights_path(directory, version)`` so a server never sees a
partial one. Other ranks walk the generator (producing each tensor is collective). The model's config and
tokenizer files are copied beside the weights when ``model_dir`` is a local directory, so the result loads as a
Hugging Face model directory. Only the ``keep_last`` newest versions are kept.

``ExternalPoolTrainer`` configures all of this for ``weight_sync: reload_from_checkpoint``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import AsyncIterator, Iterable
from typing import Any

import torch
from verl.checkpoint_engine.base import CheckpointEngine, CheckpointEngineRegistry

from ._checks import DISK_BACKEND
from ._weight_sync import weights_path

__all__ = ["DiskCheckpointEngine", "MANIFEST"]

#: Written last into each version directory: what a server may check before loading.
MANIFEST = "verl_ctx_weights.json"
_MODEL_FILES = re.compile(
    r"^(config\.json|generation_config\.json|tokenizer.*|special_tokens_map\.json|vocab\..*|merges\.txt|.*\.tiktoken|chat_template\..*)$"
)


async def _tensors(
    weights: Iterable[tuple[str, torch.Tensor]] | AsyncIterator[tuple[str, torch.Tensor]],
) -> AsyncIterator[tuple[str, torch.Tensor]]:
    if hasattr(weights, "__aiter__"):
        async for item in weights:
            yield item
    else:
        for item in weights:
            yield item


@CheckpointEngineRegistry.register(DISK_BACKEND)
class DiskCheckpointEngine(CheckpointEngine):  # type: ignore[misc]
    """Writes the weights a sync would send to ``directory/version_<global_steps>``, as safetensors shards."""

    def __init__(
        self,
        bucket_size: int,
        is_master: bool = False,
        directory: str = "",
        keep_last: int = 2,
        model_dir: str | None = None,
    ) -> None:
        if not directory:
            raise ValueError(
                f"the {DISK_BACKEND} checkpoint engine needs engine_kwargs.{DISK_BACKEND}.directory "
                "(ExternalPoolTrainer sets it from weight_sync.directory)"
            )
        self.bucket_size = max(int(bucket_size), 1)
        self.is_master = is_master
        self.directory = directory
        self.keep_last = max(int(keep_last), 1)
        self.model_dir = model_dir

    # The receive side is the servers' own load_weights: no process group, no topology, nothing to free.
    def prepare(self) -> dict[str, Any]:
        return {}

    @classmethod
    def build_topology(
        cls, actor_wg_world_size: int, rollout_world_size: int, metadata: list[dict[str, Any]]
    ) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
        return {}, {}

    def init_process_group(self, **kwargs: Any) -> None:
        return None

    def finalize(self) -> None:
        return None

    async def receive_weights(self, global_steps: int | None = None) -> Any:
        raise NotImplementedError(f"{DISK_BACKEND} has no receive side: servers load the directory themselves")

    async def send_weights(self, weights: Any, global_steps: int | None = None) -> dict[str, float]:
        """Rank 0 writes ``weights`` for version ``global_steps``; other ranks only walk the generator."""
        if not self.is_master:
            async for _ in _tensors(weights):
                pass
            return {}
        if global_steps is None:
            raise ValueError(f"{DISK_BACKEND} needs global_steps: it names the version directory servers load")
        from safetensors.torch import save_file

        started = time.monotonic()
        final = weights_path(self.directory, int(global_steps))
        partial = f"{final}.partial-{os.getpid()}"
        shutil.rmtree(partial, ignore_errors=True)
        os.makedirs(partial)
        shards: list[dict[str, torch.Tensor]] = [{}]
        pending_bytes, total_bytes, count = 0, 0, 0
        files: list[str] = []

        def flush() -> None:
            nonlocal pending_bytes
            if shards[-1]:
                name = f"shard-{len(files) + 1:05d}.safetensors"
                save_file(shards[-1], os.path.join(partial, name), metadata={"format": "pt"})
                files.append(name)
                shards[-1] = {}
                pending_bytes = 0

        weight_map: dict[str, str] = {}
        async for name, tensor in _tensors(weights):
            # a copy: the engine's tensors may alias live parameters, and tied weights share storage
            cpu = tensor.detach().to("cpu", copy=True).contiguous()
            size = cpu.numel() * cpu.element_size()
            if pending_bytes and pending_bytes + size > self.bucket_size:
                flush()
            shards[-1][name] = cpu
            weight_map[name] = str(len(files))  # index of the shard it lands in, named below
            pending_bytes += size
            total_bytes += size
            count += 1
        flush()
        names = self._name_shards(partial, files)
        if len(names) > 1:
            index = {
                "metadata": {"total_size": total_bytes},
                "weight_map": {tensor: names[int(i)] for tensor, i in weight_map.items()},
            }
            with open(os.path.join(partial, "model.safetensors.index.json"), "w") as f:
                json.dump(index, f)
        self._copy_model_files(partial)
        manifest = {"version": int(global_steps), "tensors": count, "bytes": total_bytes, "files": names}
        with open(os.path.join(partial, MANIFEST), "w") as f:
            json.dump(manifest, f)
        if os.path.exists(final):  # the same version again (a resumed run): replace it whole
            shutil.rmtree(final)
        os.replace(partial, final)
        self._prune()
        return {
            "verl_ctx/weight_sync/bytes": float(total_bytes),
            "verl_ctx/weight_sync/write_s": time.monotonic() - started,
        }

    @staticmethod
    def _name_shards(directory: str, files: list[str]) -> list[str]:
        """Hugging Face's names: ``model.safetensors`` alone, else ``model-0000i-of-0000n.safetensors``."""
        if len(files) == 1:
            names = ["model.safetensors"]
        else:
            names = [f"model-{i + 1:05d}-of-{len(files):05d}.safetensors" for i in range(len(files))]
        for old, new in zip(files, names, strict=True):
            os.replace(os.path.join(directory, old), os.path.join(directory, new))
        return names

    def _copy_model_files(self, directory: str) -> None:
        if not self.model_dir or not os.path.isdir(self.model_dir):
            return  # a remote model path: servers already have the config and tokenizer
        for entry in os.listdir(self.model_dir):
            source = os.path.join(self.model_dir, entry)
            if _MODEL_FILES.match(entry) and os.path.isfile(source):
                shutil.copy2(source, os.path.join(directory, entry))

    def _prune(self) -> None:
        versions = []
        for entry in os.listdir(self.directory):
            found = re.fullmatch(r"version_(\d+)", entry)
            if found:
                versions.append((int(found.group(1)), entry))
        for _, entry in sorted(versions)[: -self.keep_last]:
            shutil.rmtree(os.path.join(self.directory, entry), ignore_errors=True)
