"""What a rehearsal (``_launch.rehearse``) sets and checks in the launch's config: it is one short run on a small
machine's CPUs, and a setting it cannot run with is told before Ray starts, or named when verl fails on it."""

from __future__ import annotations

from typing import Any

from ...errors import LaunchError

__all__ = ["REHEARSAL_CPUS", "check_cpus", "empty_dataloader", "rehearsal_settings"]

#: The logical CPUs of a rehearsal's Ray cluster when the config sets none (see ``rehearsal_settings``).
REHEARSAL_CPUS = 32


def rehearsal_settings(config: Any) -> list[str]:
    """A rehearsal's own settings, set in ``config`` in place (it is one short run on a small machine's CPUs): Ray's
    CPUs and dashboard where the config leaves them unset; one storage unit, the console logger and no dataloader
    processes always; a recipe's own ``data.*batch_size`` keys above ``data.train_batch_size`` brought down to it.
    Everything else is the launch's own. Returns the recipe's keys it changed, as ``key=value`` (to be told)."""
    from omegaconf import open_dict

    lowered = []
    with open_dict(config):
        # A recipe's own batch keys (DAPO's data.gen_batch_size: the dataloader's batch) are not among tiny-run's
        # overrides; at their launch size the tiny dataset makes no batch ("Train dataloader is empty!").
        train_batch = config.data.get("train_batch_size")
        for key, value in config.data.items():
            if (
                str(key).endswith("batch_size")
                and key != "train_batch_size"
                and isinstance(value, int)
                and isinstance(train_batch, int)
                and value > train_batch
            ):
                config.data[key] = train_batch
                lowered.append(f"data.{key}={train_batch}")
        # One CPU process per pool (see _rehearsal); no trackers. Logical CPUs cost nothing (Ray starts no process
        # per CPU), while an actor asking for more than the cluster has waits forever: verl's own ask for up to 10
        # each (the fully-async trainer and rollouter, beside their message queue, TaskRunner and pools).
        if config.ray_kwargs.ray_init.get("num_cpus") is None:
            config.ray_kwargs.ray_init.num_cpus = REHEARSAL_CPUS
        # Ray's dashboard (a head process and its module processes) is a tenth of a rehearsal's CPU time on a small
        # machine and nothing reads it in a minute-long run; a config that sets it keeps its own.
        if config.ray_kwargs.ray_init.get("include_dashboard") is None:
            config.ray_kwargs.ray_init.include_dashboard = False
        config.transfer_queue.backend.SimpleStorage.num_data_storage_units = 1
        config.trainer.logger = ["console"]
        config.data.dataloader_num_workers = 0
    return lowered


def empty_dataloader(cause: str, config: Any) -> str:
    """For verl's "Train dataloader is empty!": the batch keys that ask for more rows than the data has."""
    if "dataloader is empty" not in cause:
        return ""
    keys = [f"data.{k}={v}" for k, v in config.data.items() if str(k).endswith("batch_size") and isinstance(v, int)]
    return (
        f"; one batch is more rows than data.train_files has: {', '.join(keys)} (lower them for the rehearsal, "
        "or give it more rows)"
    )


def check_cpus(config: Any) -> None:
    """Refuse a rehearsal Ray could not schedule: it would wait for CPUs forever, silently."""
    # The TaskRunner and the one colocated worker process (every role shares verl's global pool); the v1 trainer
    # adds TransferQueue's controller and its storage unit. One logical CPU each.
    needed = 2 + (2 if config.trainer.use_v1 else 0)
    given = config.ray_kwargs.ray_init.get("num_cpus")
    import ray

    if ray.is_initialized():
        given = int(ray.cluster_resources().get("CPU", 0))
    if given is not None and given < needed:
        raise LaunchError(
            f"a rehearsal needs {needed} logical CPUs in Ray (the TaskRunner, one worker process"
            + (", TransferQueue's controller and storage unit" if config.trainer.use_v1 else "")
            + f"); Ray has {given}. Set ray_kwargs.ray_init.num_cpus={needed} or more (logical CPUs: any machine can)",
            cause=f"{given} CPUs, {needed} needed",
            key="ray_kwargs.ray_init.num_cpus",
        )
