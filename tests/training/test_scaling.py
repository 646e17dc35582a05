"""Beyond one laptop: mixed precision, torch.compile, data on the device, several processes.

What a GPU adds is tested on the CPU where the same code runs there (autocast in bfloat16 and
float16 with a gradient scaler, the data kept on "the device"); the choices that only a GPU makes
(bfloat16 or float16) are tested as decisions. Several processes are two CPU processes on the gloo
backend, as torchrun starts them on GPUs.
"""

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.utils.data import DataLoader, TensorDataset

from tests.conftest import TINY_VIT
from vitcourse.checkpoints import CheckpointError, load_checkpoint
from vitcourse.data.batching import InMemoryImages
from vitcourse.data.loading import QUICK_SIZES, dataset_info, make_loaders
from vitcourse.data.sharding import ShardSampler
from vitcourse.training.callbacks import Callback
from vitcourse.training.evaluation import evaluate
from vitcourse.training.loop import TrainConfig, Trainer
from vitcourse.training.scaling import autocast_dtype, distributed, init_distributed
from vitcourse.vit import VisionTransformer

ROOT = Path(__file__).resolve().parents[2]


# --- mixed precision -----------------------------------------------------------------------------


def test_auto_precision_is_float32_off_cuda_and_bf16_or_fp16_on_it(monkeypatch):

    assert autocast_dtype(torch.device("cpu")) is None
    assert autocast_dtype(torch.device("mps")) is None
    # torch answers True on a T4 unless emulation is left out: only native bfloat16 counts.
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)
    assert autocast_dtype(torch.device("cuda")) is torch.bfloat16
    monkeypatch.setattr(
        torch.cuda, "is_bf16_supported", lambda including_emulation=True: including_emulation
    )
    assert autocast_dtype(torch.device("cuda")) is torch.float16  # a T4, a V100
    assert autocast_dtype(torch.device("cuda"), "fp32") is None
    with pytest.raises(ValueError, match="precision must be one of .*got 'half'"):
        autocast_dtype(torch.device("cpu"), "half")


def test_the_cpu_trainer_is_unchanged_float32_without_a_scaler(toy_loaders):

    trainer = Trainer(VisionTransformer(TINY_VIT), toy_loaders(), device="cpu")
    assert trainer.amp_dtype is None and trainer.scaler is None
    assert trainer.network is trainer.model


@pytest.mark.slow  # about 17 s each: autocast on a CPU without native bfloat16 is slow
@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_trains_and_fp16_scales_the_loss(precision, toy_loaders):

    torch.manual_seed(0)
    trainer = Trainer(
        VisionTransformer(TINY_VIT),
        toy_loaders(),
        TrainConfig(epochs=4, lr=3e-3),
        device="cpu",
        precision=precision,
    )
    assert trainer.amp_dtype == {"bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    seen = []
    hook = trainer.model.head.register_forward_hook(lambda m, i, o: seen.append(o.dtype))
    trainer.fit()
    hook.remove()
    assert seen[0] == trainer.amp_dtype  # the forward pass ran in the lower precision
    assert trainer.model.head.weight.dtype == torch.float32  # the weights stay float32
    if precision == "fp16":
        assert trainer.scaler is not None and trainer.scaler.get_scale() > 1
    else:
        assert trainer.scaler is None  # bfloat16 has float32's range: nothing to scale
    losses = trainer.history.step_losses
    assert sum(losses[-5:]) / 5 < 0.8 * sum(losses[:5]) / 5
    assert trainer.history.epochs[-1]["val_acc"] > 0.6


@pytest.mark.slow
def test_compiled_training_matches_eager_and_saves_plain_weights(tmp_path, toy_loaders):

    runs = {}
    for compile in (False, True):
        torch.manual_seed(0)
        trainer = Trainer(
            VisionTransformer(TINY_VIT),
            toy_loaders(),
            TrainConfig(epochs=1),
            device="cpu",
            compile=compile,
        )
        trainer.fit()
        trainer.save(tmp_path / f"{compile}.pt")
        runs[compile] = trainer
    assert runs[True].network is not runs[True].model  # the compiled module wraps the model
    weights = load_checkpoint(tmp_path / "True.pt")["model"]
    assert not any("_orig_mod" in key for key in weights)  # loadable into a plain model
    VisionTransformer(TINY_VIT).load_state_dict(weights)
    torch.testing.assert_close(
        runs[True].history.step_losses, runs[False].history.step_losses, rtol=1e-3, atol=1e-4
    )


# --- the data on the device ----------------------------------------------------------------------


def test_in_memory_images_read_the_same_wherever_they_are_kept():

    info = dataset_info("fashion-mnist")
    images = torch.randint(0, 256, (6, 1, 28, 28), dtype=torch.uint8)
    plain = InMemoryImages(images, torch.arange(6), info, augment=False)
    moved = plain.to("cpu")
    assert moved.images.device.type == "cpu" and moved.info is info
    assert plain[3][1] == 3 and isinstance(plain[3][1], int)  # labels as plain ints on the CPU
    torch.testing.assert_close(moved[3][0], plain[3][0])


def test_make_loaders_on_device_gives_the_same_batches(tmp_path):

    batches = {}
    for on_device in (True, False):
        loaders = make_loaders(limit=64, batch_size=16, device="cpu", on_device=on_device)
        torch.manual_seed(0)  # the augmentation's random crops and flips
        batches[on_device] = list(loaders.train)
    for (a, y), (b, z) in zip(batches[True], batches[False], strict=True):
        torch.testing.assert_close(a, b)
        assert torch.equal(y, z)


# --- several processes: joining -------------------------------------------------------------------


def test_init_distributed_outside_torchrun_starts_nothing(monkeypatch):

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert init_distributed("cpu") == (0, 1, "cpu")
    assert not distributed()


# --- several processes: training -----------------------------------------------------------------

IMAGES = torch.randn(64, 1, 8, 8, generator=torch.Generator().manual_seed(1))
LABELS = torch.randint(0, 3, (64,), generator=torch.Generator().manual_seed(2))
GLOBAL_BATCH = 16


def _loaders(rank: int, world: int):
    """The toy images, shared between `world` processes as make_loaders shares them."""
    data = TensorDataset(IMAGES, LABELS)
    gen = torch.Generator().manual_seed(0)
    share = ShardSampler(len(data), rank, world, True, gen)
    evaluation = ShardSampler(len(data), rank, world, False)

    class Loaders:
        train = DataLoader(data, GLOBAL_BATCH // world, sampler=share, generator=gen)
        val = DataLoader(data, 32, sampler=evaluation)
        test = val

    return Loaders


class SlowFirstProcess(Callback):
    """Rank 0 spends longer per step (as its progress bar and plots do): its clock runs ahead."""

    def on_step_end(self, trainer, loss):
        time.sleep(0.02)


def _train_one_process(rank: int, world: int, port: int, out: str, minutes: float | None) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        torch.manual_seed(rank)  # different starting weights: DDP must hand out rank 0's
        # With a time budget, a convolutional stem: BatchNorm's running statistics, which each
        # process updates from its own batches, must end the same in every process too.
        config = dataclasses.replace(TINY_VIT, stem_channels=(4,)) if minutes else TINY_VIT
        trainer = Trainer(
            VisionTransformer(config),
            _loaders(rank, world),
            TrainConfig(epochs=1, minutes=minutes, warmup=0.0),
            callbacks=[SlowFirstProcess()] if rank == 0 and minutes else [],
            device="cpu",
        )
        trainer.fit()
        torch.save(
            {
                "model": trainer.model.state_dict(),
                "epochs": trainer.history.epochs,
                "steps": trainer.steps_done,
                "draw": torch.rand(1),  # each process draws its own random numbers
            },
            Path(out) / f"rank{rank}.pt",
        )
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_processes_end_with_the_same_weights_as_one_process_on_the_whole_batch(tmp_path):

    # 64 images, a batch of 16 for both together: 4 steps of one epoch.
    mp.spawn(_train_one_process, args=(2, _free_port(), str(tmp_path), None), nprocs=2)
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(2)]
    for key, value in ranks[0]["model"].items():
        assert torch.equal(value, ranks[1]["model"][key]), key  # every process holds one model
    assert ranks[0]["epochs"] == [
        {**r, "seconds": ranks[0]["epochs"][0]["seconds"]} for r in ranks[1]["epochs"]
    ]  # metrics summed over the processes: each process reports the same

    # One process with the whole batch of 16 takes the same 4 steps on the same images.
    class Whole:
        train = DataLoader(
            TensorDataset(IMAGES, LABELS),
            GLOBAL_BATCH,
            shuffle=True,
            generator=torch.Generator().manual_seed(0),
        )
        val = DataLoader(TensorDataset(IMAGES, LABELS), 64)

    torch.manual_seed(0)
    one = Trainer(
        VisionTransformer(TINY_VIT), Whole, TrainConfig(epochs=1, warmup=0.0), device="cpu"
    )
    torch.manual_seed(0)  # rank 0's starting weights, which DDP handed to every process
    one.model.load_state_dict(VisionTransformer(TINY_VIT).state_dict())
    one.fit()
    for key, value in one.model.state_dict().items():
        torch.testing.assert_close(ranks[0]["model"][key], value, rtol=1e-4, atol=1e-5)
    whole = evaluate(one.model, Whole.val, torch.device("cpu"))
    record = ranks[0]["epochs"][0]
    assert record["val_acc"] == pytest.approx(whole["acc"])  # over all 64 images, not a share
    assert record["val_loss"] == pytest.approx(whole["loss"], rel=1e-4)
    assert record["train_loss"] == pytest.approx(one.history.epochs[0]["train_loss"], rel=1e-4)


@pytest.mark.slow
def test_with_a_time_budget_every_process_stops_after_the_same_step(tmp_path):

    # Rank 0's clock runs ahead; had each process followed its own clock, rank 1 would go on to a
    # step rank 0 never joins, and wait for it forever.
    mp.spawn(_train_one_process, args=(2, _free_port(), str(tmp_path), 0.05), nprocs=2)
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(2)]
    assert ranks[0]["steps"] == ranks[1]["steps"] > 1
    assert len(ranks[0]["epochs"]) == len(ranks[1]["epochs"])
    assert any("running_mean" in key for key in ranks[0]["model"])
    for key, value in ranks[0]["model"].items():  # weights and BatchNorm's statistics
        assert torch.equal(value, ranks[1]["model"][key]), key
    assert not torch.equal(ranks[0]["draw"], ranks[1]["draw"])


def test_a_mid_epoch_checkpoint_resumes_only_with_as_many_processes(tmp_path, toy_loaders):

    trainer = Trainer(VisionTransformer(TINY_VIT), toy_loaders(), device="cpu")
    state = trainer.state_dict()
    state["schedule"].update(batch=3, world_size=4)
    torch.save(state, tmp_path / "run.pt")
    with pytest.raises(CheckpointError, match="middle of an epoch with 4 processes.*has 1"):
        trainer.resume(tmp_path / "run.pt")
    state["schedule"].update(batch=0)  # at an epoch's end any number of processes may go on
    torch.save(state, tmp_path / "run.pt")
    trainer.resume(tmp_path / "run.pt")


def _torchrun(*args: str, cwd: Path, ok: bool = True) -> subprocess.CompletedProcess:
    """`torchrun --nproc_per_node=2 -m vitcourse.train ARGS` in quick mode; `ok`: it must
    succeed."""
    env = {**os.environ, "VITCOURSE_QUICK": "1", "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2"]
    command += ["--master_port", str(_free_port()), "-m", "vitcourse.train", *args]
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    if ok:
        assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.mark.slow
def test_torchrun_trains_writes_once_and_resumes(tmp_path):

    out = tmp_path / "run"
    common = [
        "--preset",
        "course-28/7",
        "--device",
        "cpu",
        "--batch-size",
        "128",
        "--out",
        str(out),
    ]
    first = _torchrun("--epochs", "1", *common, cwd=tmp_path)
    assert first.stdout.count("test accuracy") == 1  # only rank 0 prints and writes
    assert "2 processes of 64 images a step each" in first.stdout
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["world_size"] == 2 and metrics["batch_size"] == 128
    quick = QUICK_SIZES[0]  # quick mode's training images
    assert metrics["epochs"][0]["steps"] == quick // 128  # the steps of one process with 128
    assert sum(map(sum, metrics["confusion"])) == metrics["test_images"] == QUICK_SIZES[2]
    assert {p.name for p in out.iterdir()} >= {"checkpoint.pt", "model.pt", "attention.png"}
    assert load_checkpoint(out / "checkpoint.pt")["schedule"]["world_size"] == 2

    second = _torchrun("--resume", "--epochs", "2", *common, cwd=tmp_path)
    assert "resuming" in second.stdout
    metrics = json.loads((out / "metrics.json").read_text())
    assert [r["epoch"] for r in metrics["epochs"]] == [1, 2]
    assert metrics["epochs"][1]["steps"] == 2 * quick // 128


@pytest.mark.slow
def test_torchrun_refuses_a_batch_the_processes_cannot_share(tmp_path):

    args = ["--batch-size", "101", "--device", "cpu", "--out", str(tmp_path / "run")]
    done = _torchrun(*args, cwd=tmp_path, ok=False)
    assert done.returncode != 0
    assert "--batch-size 101 is the batch of all 2 processes together" in done.stderr


def test_the_default_learning_rate_grows_with_the_square_root_of_the_batch():

    from vitcourse.cli.train import parse_args
    from vitcourse.cli.train_run import plan, scaled_lr

    assert scaled_lr(128) == pytest.approx(2e-3)  # the CPU recipe, unchanged
    assert scaled_lr(512) == pytest.approx(4e-3)  # what benchmarks/batch_scaling.py found best
    args = parse_args(["--batch-size", "512"])
    assert plan(args).train_config.lr == pytest.approx(4e-3)
    args = parse_args(["--batch-size", "512", "--lr", "1e-3"])
    assert plan(args).train_config.lr == pytest.approx(1e-3)  # a rate asked for stands


@pytest.mark.slow  # float16 autocast on a CPU is slow
def test_the_float16_gradient_scale_is_saved_and_resumed(tmp_path, toy_loaders):

    def fp16_trainer():
        return Trainer(
            VisionTransformer(TINY_VIT), toy_loaders(), TrainConfig(epochs=1), device="cpu",
            precision="fp16",
        )  # fmt: skip

    trainer = fp16_trainer()
    trainer.fit()
    trainer.scaler.update(1234.0)  # a scale the steps might have learned
    trainer.save(tmp_path / "run.pt")
    again = fp16_trainer()
    again.resume(tmp_path / "run.pt")
    assert again.scaler.get_scale() == 1234.0


@pytest.mark.slow
def test_ctrl_c_under_torchrun_saves_a_checkpoint_that_resumes(tmp_path):

    out = tmp_path / "run"
    env = {**os.environ, "VITCOURSE_QUICK": "1", "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2"]
    command += ["--master_port", str(_free_port()), "-m", "vitcourse.train", "--epochs", "500"]
    command += ["--preset", "course-28/7", "--device", "cpu", "--batch-size", "128"]
    # A terminal's Ctrl-C reaches torchrun and both processes: a process group of their own.
    run = subprocess.Popen(
        [*command, "--out", str(out)],
        env=env,
        cwd=tmp_path,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not (out / "checkpoint.pt").exists() and time.monotonic() < deadline:
        time.sleep(0.5)  # the first epoch's checkpoint: training is under way
    time.sleep(1)
    os.killpg(run.pid, signal.SIGINT)
    output = run.communicate(timeout=120)[0]
    assert output.count("interrupted at step") == 2, output[-3000:]  # both processes stopped
    state = load_checkpoint(out / "checkpoint.pt")
    assert state["schedule"]["world_size"] == 2 and state["schedule"]["epoch"] < 500
    stopped_at = state["schedule"]["epoch"]
    done = _torchrun("--resume", "--epochs", str(stopped_at + 1), "--out", str(out), cwd=tmp_path)
    assert "resuming" in done.stdout
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["epochs"][-1]["epoch"] == stopped_at + 1 and not metrics["interrupted"]


def test_torchrun_on_a_device_it_cannot_share_is_a_clear_error(monkeypatch):

    monkeypatch.setenv("WORLD_SIZE", "2")  # as torchrun --nproc_per_node=2 sets it
    monkeypatch.setenv("LOCAL_RANK", "0")
    with pytest.raises(ValueError, match="train on CUDA GPUs or on the CPU, not on 'mps'"):
        init_distributed("mps")
    assert not distributed()
