"""Test helpers: hand worker code the objects verl would, carrying given contexts, without Ray or a GPU.

Unit-test the code that reads a context the way it runs in the worker::

    from verl_ctx.testing import hydra_config, worker_config

    def test_critic_reads_its_clip():
        config = worker_config(CriticContext(value_clip=0.3))        # verl's real TrainingWorkerConfig
        assert MyCriticWorker.read_settings(config).value_clip == 0.3

    def test_reward_reads_the_judge():
        config = hydra_config(RewardContext(judge=Judge(url="http://j")))   # verl's composed DictConfig
        assert my_reward_fn_context(config).judge.url == "http://j"

``bound_worker`` gives an instance of a worker class bound as ``verl-ctx run`` binds it, built without running
its constructor (which would start Ray, a process group or an engine). ``tiny_model``, ``tiny_dataset`` and
``tiny_run_args`` give a model config + tokenizer, a parquet file and the overrides that make
``verl-ctx run --rehearse`` run verl's real launch path on a laptop's CPU. ``save_checkpoint`` saves a checkpoint's
contexts as a run's trainer saves them, without training, Ray or a GPU, to try a resume or ``verl-ctx diff``.

verl, Hydra and (for ``tiny_*``) transformers and pandas are imported when a helper is called.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ._driver import contextset as _contextset
from ._model import fingerprint as _fingerprint
from ._model import role_context as _schema
from ._wire import envelope as _envelope

__all__ = [
    "bound_worker",
    "contexts",
    "hydra_config",
    "reward_kwargs",
    "save_checkpoint",
    "tiny_dataset",
    "tiny_model",
    "tiny_run_args",
    "worker_config",
]


def contexts(*items: _schema.RoleContext) -> _contextset.ContextSet:
    """A ``ContextSet`` of the given contexts (one per role), as ``validate`` would return."""
    by_role: dict[str, _schema.RoleContext] = {}
    for ctx in items:
        roles = _fingerprint.schema_info(type(ctx)).roles
        if len(roles) != 1:
            raise ValueError(f"{type(ctx).__qualname__} serves roles {', '.join(roles)}; build a ContextSet yourself")
        by_role[roles[0]] = ctx
    return _contextset.ContextSet(by_role)


def worker_config(*items: _schema.RoleContext, model_type: str = "language_model", **fields: Any) -> Any:
    """verl's ``TrainingWorkerConfig`` whose ``extra_context`` carries ``items``, as a bound worker receives it."""
    from verl.workers.config import TrainingWorkerConfig

    return TrainingWorkerConfig(model_type=model_type, extra_context=dict(_envelope.attach({}, *items)), **fields)


def hydra_config(*items: _schema.RoleContext, overrides: Sequence[str] = ()) -> Any:
    """verl's own ``ppo_trainer`` config (a ``DictConfig``), composed with ``overrides``, carrying ``items``.

    Each config-channel context sits where ``verl-ctx run`` puts it: rollout in
    ``actor_rollout_ref.rollout.custom``, reward and custom roles at the top-level ``verl_ctx`` slot (what a
    reward manager or agent loop is handed). Actor, ref and critic contexts travel in worker classes instead:
    use ``worker_config`` or ``bound_worker`` for those.
    """
    from .integrations.verl import bind_config, compose_config

    config = compose_config(overrides=overrides)
    bind_config(config, {role: _envelope.encode(ctx) for role, ctx in contexts(*items).items()})
    return config


def reward_kwargs(*items: _schema.RoleContext) -> dict[str, Any]:
    """The keyword arguments verl's reward loop passes a ``compute_score(..., **kwargs)`` carrying ``items``: the
    ``reward.custom_reward_function.reward_kwargs`` ``verl-ctx run`` writes. ``decode(kwargs, RewardContext)`` reads
    them as the function does at run time::

        assert compute_score("gsm8k", "42", "42", **reward_kwargs(RewardContext(length_penalty=-0.1))) == ...
    """
    texts = {role: _envelope.to_text(_envelope.encode(ctx)) for role, ctx in contexts(*items).items()}
    return {_envelope.RESERVED_KEY: texts}


def bound_worker(worker_cls: type, *items: _schema.RoleContext, config: Any = None) -> Any:
    """An instance of ``worker_cls`` bound to ``items`` as ``verl-ctx run`` binds it; its ``__init__`` is not run.

    ``decode(worker, Schema)`` then reads what the worker would read at run time; ``config`` becomes
    ``worker.config`` (for a hybrid worker: the ``actor_rollout_ref`` part of a ``hydra_config``).
    """
    from .integrations.verl import bind_worker_cls

    bound = bind_worker_cls(worker_cls, {role: _envelope.encode(ctx) for role, ctx in contexts(*items).items()})
    worker: Any = object.__new__(bound)
    if config is not None:
        worker.config = config
    return worker


def tiny_model(directory: str | Path, *, vocab_size: int = 64) -> Path:
    """A one-layer Llama config and a word-level tokenizer in ``directory``: enough for verl to read a model path.

    No weights are written; nothing is downloaded.
    """
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, PreTrainedTokenizerFast

    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    words = ["<pad>", "<s>", "</s>", "<unk>", *(f"w{i}" for i in range(vocab_size - 4))]
    tokenizer: Any = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", pad_token="<pad>", unk_token="<unk>"
    )
    fast.chat_template = (
        "{% for m in messages %}{{ m['content'] }} {% endfor %}{% if add_generation_prompt %}</s>{% endif %}"
    )
    fast.save_pretrained(path)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=256,
        architectures=["LlamaForCausalLM"],
    )
    config.save_pretrained(path)
    return path


def tiny_dataset(directory: str | Path, *, rows: int = 8) -> Path:
    """A parquet file of ``rows`` chat prompts in verl's RL data layout; returns its path."""
    import pandas as pd

    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    file = path / "train.parquet"
    pd.DataFrame(
        {
            "data_source": ["tiny"] * rows,
            "prompt": [[{"role": "user", "content": f"w{i} w{i + 1}"}] for i in range(rows)],
            "ability": ["math"] * rows,
            "reward_model": [{"style": "rule", "ground_truth": "w1"}] * rows,
            "extra_info": [{"index": i} for i in range(rows)],
        }
    ).to_parquet(file)
    return file


def tiny_run_args(model: str | Path, data: str | Path) -> list[str]:
    """verl overrides for a one-GPU-sized run of ``model`` on ``data``: small batches, every size verl checks set.

    With them ``verl-ctx run --rehearse`` passes verl's own pre-launch checks on a machine without GPUs; add your
    recipe's own overrides (``algorithm.adv_estimator=gae`` for a critic, ``actor_rollout_ref.actor.use_kl_loss=true``
    for a reference policy, ...).
    """
    return [
        f"actor_rollout_ref.model.path={model}",
        f"critic.model.path={model}",
        f"data.train_files={data}",
        f"data.val_files={data}",
        "data.train_batch_size=2",
        "data.max_prompt_length=16",
        "data.max_response_length=16",
        "data.dataloader_num_workers=0",  # 8 dataloader processes for 8 rows only slow a small machine down
        "actor_rollout_ref.actor.ppo_mini_batch_size=2",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=1",
        "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",  # one replica fits the one GPU (verl's default: 2)
        "critic.ppo_mini_batch_size=2",
        "critic.ppo_micro_batch_size_per_gpu=1",
        "trainer.n_gpus_per_node=1",
        "trainer.nnodes=1",
    ]


class _CheckpointOnlyTrainer:
    """Stands for verl's trainer (v1 ``PPOTrainer``, legacy ``RayPPOTrainer``) in ``save_checkpoint``.

    verl-ctx binds it as it binds verl's (``bound_trainer_cls``), so the contexts are compared, recorded and saved by
    the code a real run runs. It builds no worker group and has no model: its ``_save_checkpoint`` writes what verl's
    writes without one, the step's folder and then, last, ``latest_checkpointed_iteration.txt``, which
    ``resume_mode=auto`` reads.
    """

    config: Any
    global_steps: int

    def init_workers(self) -> None:
        """verl builds the worker groups here; the bound class compares a resume's contexts first."""

    def _load_checkpoint(self) -> None:
        """verl loads the weights here; nothing to load."""

    def _save_checkpoint(self) -> None:
        run_dir = str(self.config.trainer.default_local_dir)
        os.makedirs(os.path.join(run_dir, f"global_step_{self.global_steps}"), exist_ok=True)
        tracker = os.path.join(run_dir, "latest_checkpointed_iteration.txt")
        with open(tracker, "w") as f:  # as verl writes it
            f.write(str(self.global_steps))


def save_checkpoint(
    launched: Mapping[str, _schema.RoleContext] | Iterable[_schema.RoleContext],
    directory: str | os.PathLike[str] | None = None,
    *,
    step: int,
    config: Any = None,
) -> Path:
    """Save step ``step`` of a run launched with ``launched`` as its trainer saves it; return ``global_step_N``.

    No training, Ray or GPU: the contexts travel as ``verl-ctx run`` sends them (actor, ref and critic on the trainer's
    class, the others in the config) and verl-ctx's own checkpoint code, bound to a trainer that stands for verl's,
    writes ``global_step_N/verl_ctx/`` (envelopes with secrets sealed, readable values, the history) and
    ``latest_checkpointed_iteration.txt``. verl's model and dataloader files (``actor/``, ``critic/``, ``data.pt``)
    are not written: nothing was trained.

    ``launched`` is what ``validate`` returned (a ``ContextSet``), a ``role -> context`` mapping, or contexts.
    ``config`` is the launch's composed config (default: verl's own); ``directory`` replaces its
    ``trainer.default_local_dir``. As in a real run, ``trainer.resume_mode`` (``auto`` by default) resumes from the
    latest checkpoint there first: its contexts are compared with these, a change stops with
    ``ContextChangedError`` unless the config sets ``verl_ctx_accept_change=true``, and the resume is recorded in the
    history that the new checkpoint carries on.
    """
    import copy

    from omegaconf import open_dict

    from .integrations.verl import bind_config, bound_trainer_cls, compose_config
    from .integrations.verl._binding import WORKER_CLASS_ROLES

    if isinstance(launched, _contextset.ContextSet):
        given = launched
    elif isinstance(launched, Mapping):
        given = _contextset.ContextSet(launched)
    else:
        given = contexts(*launched)
    config = compose_config() if config is None else copy.deepcopy(config)
    if directory is not None:
        with open_dict(config):
            config.trainer.default_local_dir = os.fspath(directory)
    # Inline envelopes: the store a secret or a large context waits in hands the trainer these same envelopes.
    envelopes = given.envelopes()
    bind_config(config, envelopes, redacted=given.redacted())
    on_class = {role: env for role, env in envelopes.items() if role in WORKER_CLASS_ROLES}
    trainer: Any = object.__new__(bound_trainer_cls(_CheckpointOnlyTrainer, on_class))
    trainer.config = config
    trainer.global_steps = 0
    trainer.init_workers()  # the resume comparison, before any worker group (recorded in the checkpoint's history)
    trainer._load_checkpoint()
    trainer.global_steps = int(step)
    trainer._save_checkpoint()  # the contexts, then "verl's" save
    return Path(str(config.trainer.default_local_dir), f"global_step_{int(step)}")


def _main(argv: Sequence[str]) -> int:
    """``python -m verl_ctx.testing tiny-run DIR`` / ``save-checkpoint --step N -s MODULE [VERL_ARGS]``.

    ``tiny-run`` writes a tiny model and dataset into DIR and prints their overrides, for a shell:
    ``verl-ctx run --rehearse ... $(python -m verl_ctx.testing tiny-run /tmp/tiny)``. ``save-checkpoint`` composes
    and validates the config as ``verl-ctx run`` would with the same arguments, then saves step N as that run would
    (``save_checkpoint``), where its ``trainer.default_local_dir`` says.
    """
    if argv[:1] == ["tiny-run"] and len(argv) == 2:
        directory = Path(argv[1]).resolve()  # Ray's workers may run elsewhere than this shell
        print(" ".join(tiny_run_args(tiny_model(directory / "model"), tiny_dataset(directory / "data"))))
        return 0
    if argv[:1] == ["save-checkpoint"]:
        return _save_checkpoint_main(argv[1:])
    print("usage: python -m verl_ctx.testing tiny-run DIR\n       " + _SAVE_USAGE, file=sys.stderr)
    return 2


_SAVE_USAGE = (
    "python -m verl_ctx.testing save-checkpoint --step N -s MODULE [--config FILE] [--accept-context-change] "
    "[VERL_ARGS]..."
)


def _save_checkpoint_main(argv: Sequence[str]) -> int:
    from ._driver.modules import import_modules
    from ._driver.validate import validate
    from .errors import ConfigError, ContextError

    parser = argparse.ArgumentParser(
        prog="python -m verl_ctx.testing save-checkpoint", usage=_SAVE_USAGE, allow_abbrev=False
    )
    parser.add_argument("--step", type=int, required=True, help="the global step saved (global_step_N)")
    parser.add_argument("-s", "--schemas", dest="modules", action="append", default=[], metavar="MODULE")
    parser.add_argument("--config", dest="config_file", default=None, metavar="FILE")
    parser.add_argument("--accept-context-change", action="store_true")
    known, verl_args = parser.parse_known_args(list(argv))
    try:
        if not known.modules:
            raise ConfigError("name the module that defines your contexts with -s MODULE")
        if known.step < 0:
            raise ConfigError(f"--step {known.step}: a global step is 0 or more")
        from .integrations.verl import compose_config
        from .integrations.verl._checkpoint import accept_context_change

        import_modules(known.modules)
        config = compose_config(verl_args, config_file=known.config_file)
        launched = validate(config, overrides=[a for a in verl_args if not a.startswith("-")])
        if known.accept_context_change:
            accept_context_change(config)
        saved = save_checkpoint(launched, step=known.step, config=config)
    except ConfigError as e:
        print(f"usage error: {e}", file=sys.stderr)
        return 2
    except ContextError as e:
        print(str(e), file=sys.stderr)
        return 1
    print(f"saved {saved}: {len(launched)} role context(s) in verl_ctx/ (nothing trained: no model files)")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
