"""Time the authors' PyTorch SPAct minimax iteration on this CPU, to compare with train_step.py.

    python benchmarks/train_step_torch.py [--clips 2] [--images 4] [--size 112] [--detach]
                                          [--device cuda] [--bf16]

The models are the plain-torch layouts of tests/torch_reference.py (the tests folder is put on
sys.path to import them): milesial's UNet + sigmoid as f_A, R3D-18 in SPAct's variant as f_T,
ResNet-50 + Linear(2048, 2048)-ReLU-Linear(2048, 128) + L2 normalisation as f_B, at the sizes of
train_step.py. One iteration is the step of SPAct's train_ssl_minimax2.py, on two batches:

1. f_A half: f_A in train mode, f_T and f_B in eval mode; loss = L_T - L_B; `backward()` through
   all three models (f_T's and f_B's weight gradients are computed, then unused); only f_A's
   Adam steps.
2. Adversary half: f_A in eval mode but in the graph (not detached), f_T and f_B in train mode;
   `L_B.backward()`, f_B's Adam steps, `L_T.backward()`, f_T's Adam steps (f_A's gradients are
   computed twice, then unused).

As in the authors' code, NT-Xent (temperature 0.1, full 2N x 2N form) is on the two views of
the privacy images only, each view through f_A and f_B in its own call; train_step.py also puts
two frames of each clip into it. With `--detach` the waste goes: f_T's and f_B's parameters do
not require gradients in the f_A half, and f_A runs under `torch.no_grad` in the adversary half.

FLOPs: `model_gflops_per_step` is train_step.py's formula (what the step needs) on forward FLOPs
counted by `torch.utils.flop_counter.FlopCounterMode`; `executed_gflops_per_step` is what the
untimed warm-up iteration really ran, counted by the same mode. Efficiency = model FLOPs / time,
as a fraction of a float32 2048 x 2048 matmul measured in the same run. The machine may be
shared: the load average is printed. `--device cuda` runs it on the GPU (the batch on the device,
each half timed to its end, `peak_gib` the CUDA allocator's peak), `--bf16` under
`torch.autocast(dtype=torch.bfloat16)`, as benchmarks/gpu.py compares it. cuDNN picks each
convolution's algorithm by timing them (`cudnn.benchmark`, as the authors' script sets it) in
the two untimed iterations; the times are medians of `--steps`. Eager PyTorch in NCHW without
`torch.compile`, as the authors ran it. The last line is one JSON object.
"""

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import torch_reference as ref  # noqa: E402


def matmul_peak(device: str, n: int = 2048, repeats: int = 10) -> float:
    """FLOP/s of a plain float32 n x n matmul."""
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    a @ b
    synchronize(device)
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    synchronize(device)
    return 2 * n**3 * repeats / (time.perf_counter() - start)


def synchronize(device: str) -> None:
    """Wait for the work queued on `device` (a no-op on the CPU)."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def forward_flops(model: nn.Module, shape: tuple[int, ...]) -> int:
    """FLOPs of one forward pass of `model` on one input of `shape` (no batch axis)."""
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model.eval()(torch.zeros(1, *shape))
    return counter.get_total_flops()


def nt_xent(z1: torch.Tensor, z2: torch.Tensor, temperature: float) -> torch.Tensor:
    """NT-Xent over 2N views: each view's positive is its pair, every other view a negative."""
    n = z1.shape[0]
    z = torch.cat([z1, z2])
    logits = (z @ z.T / temperature).masked_fill(
        torch.eye(2 * n, dtype=torch.bool, device=z.device), -torch.inf
    )
    return F.cross_entropy(
        logits, torch.cat([torch.arange(n, 2 * n), torch.arange(n)]).to(z.device)
    )


def losses(
    models: dict, batch: dict, temperature: float, detach: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """L_T on the anonymized clips and L_B on the anonymized view pairs, as the authors compute
    them; f_A under `torch.no_grad` when `detach`."""
    f_a, f_t, f_b = models["anonymizer"], models["action"], models["privacy"]
    with torch.set_grad_enabled(not detach):
        views = [f_a(view) for view in batch["views"]]
        clips = batch["clips"]
        b, t, c, h, w = clips.shape
        frames = f_a(clips.reshape(-1, c, h, w)).reshape(b, t, c, h, w)
    embeddings = [F.normalize(f_b(view), dim=1) for view in views]
    privacy = nt_xent(embeddings[0], embeddings[1], temperature)
    action = F.cross_entropy(f_t(frames.permute(0, 2, 1, 3, 4)), batch["labels"])
    return action, privacy


def anonymizer_half(
    models: dict, optimizers: dict, batch: dict, temperature: float, lean: bool
) -> None:
    """Step 1 of the authors' loop: f_A minimises L_T - L_B."""
    for optimizer in optimizers.values():
        optimizer.zero_grad()
    models["anonymizer"].train()
    for group in ("action", "privacy"):
        models[group].eval().requires_grad_(not lean)
    action, privacy = losses(models, batch, temperature, detach=False)
    (action - privacy).backward()
    optimizers["anonymizer"].step()


def adversary_half(
    models: dict, optimizers: dict, batch: dict, temperature: float, lean: bool
) -> None:
    """Step 2 of the authors' loop: f_B minimises L_B, then f_T minimises L_T."""
    for optimizer in optimizers.values():
        optimizer.zero_grad()
    models["anonymizer"].eval()
    for group in ("action", "privacy"):
        models[group].train().requires_grad_(True)
    action, privacy = losses(models, batch, temperature, detach=lean)
    privacy.backward()
    optimizers["privacy"].step()
    action.backward()
    optimizers["action"].step()


def random_batch(
    generator: torch.Generator, clips: int, frames: int, size: int, images: int, device: str
) -> dict:
    """Clips (B, T, 3, H, W) as the authors' loader gives them, labels, two views of N images,
    on `device`."""
    return {
        "clips": torch.rand(clips, frames, 3, size, size, generator=generator).to(device),
        "labels": torch.randint(0, 101, (clips,), generator=generator).to(device),
        "views": [
            torch.rand(images, 3, size, size, generator=generator).to(device) for _ in range(2)
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=2)
    parser.add_argument("--images", type=int, default=4)
    parser.add_argument("--frames", type=int, default=16)
    parser.add_argument("--size", type=int, default=112)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--detach", action="store_true", help="the lean step, without the waste")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--bf16", action="store_true", help="torch.autocast to bfloat16")
    args = parser.parse_args()
    device = args.device
    torch.set_num_threads(len(os.sched_getaffinity(0)))
    torch.manual_seed(0)
    # As the authors' train_ssl_minimax2.py sets it: cuDNN times its algorithms for each
    # convolution's shapes on first use (the warm-up iterations) and keeps the fastest.
    torch.backends.cudnn.benchmark = True

    backbone = ref.ResNet()
    backbone.fc = nn.Identity()
    head = nn.Sequential(nn.Linear(2048, 2048), nn.ReLU(inplace=True), nn.Linear(2048, 128))
    models = {
        "anonymizer": ref.UNet(),
        "action": ref.VideoResNet(num_classes=101, spact=True),
        "privacy": nn.Sequential(backbone, head),
    }
    c, t, s, n = args.clips, args.frames, args.size, args.images
    f_a = forward_flops(models["anonymizer"], (3, s, s))
    f_t = forward_flops(models["action"], (3, t, s, s))
    f_b = forward_flops(models["privacy"], (3, s, s))
    models = {group: model.to(device) for group, model in models.items()}
    optimizers = {group: torch.optim.Adam(m.parameters(), lr=1e-4) for group, m in models.items()}
    generator = torch.Generator().manual_seed(0)
    pair = [random_batch(generator, c, t, s, n, device) for _ in range(2)]
    autocast = torch.autocast(device.split(":")[0], torch.bfloat16, enabled=args.bf16)

    def iteration() -> tuple[float, float]:
        synchronize(device)
        start = time.perf_counter()
        with autocast:
            anonymizer_half(models, optimizers, pair[0], 0.1, args.detach)
        synchronize(device)
        middle = time.perf_counter()
        with autocast:
            adversary_half(models, optimizers, pair[1], 0.1, args.detach)
        synchronize(device)
        return middle - start, time.perf_counter() - middle

    with FlopCounterMode(display=False) as counter:
        iteration()
    executed = counter.get_total_flops()
    iteration()  # a second warm-up: cuDNN's algorithm search, the allocator's pools
    times = [iteration() for _ in range(args.steps)]
    # Medians, as gpu.py times its steps: a step slowed by the machine's other work moves them
    # less than a mean.
    anonymizer_seconds = statistics.median(a for a, _ in times)
    adversary_seconds = statistics.median(b for _, b in times)
    step_seconds = statistics.median(a + b for a, b in times)

    # train_step.py's formula, with the authors' NT-Xent inputs (the 2N views only).
    anonymized, contrastive = c * t + 2 * n, 2 * n
    forward = anonymized * f_a + c * f_t + contrastive * f_b
    flops = (forward + c * f_t + contrastive * f_b + 2 * anonymized * f_a) + (
        forward + 2 * (c * f_t + contrastive * f_b)
    )
    peak = matmul_peak(device)
    figures = {
        "backend": "torch",
        "device": torch.cuda.get_device_name() if device.startswith("cuda") else "cpu",
        "bf16_autocast": args.bf16,
        "torch_threads": torch.get_num_threads(),
        "detach": args.detach,
        "clips_per_step": 2 * c,
        "image_pairs_per_step": 2 * n,
        "input": f"{t}x{s}x{s}",
        "seconds_anonymizer_half": round(anonymizer_seconds, 3),
        "seconds_adversary_half": round(adversary_seconds, 3),
        "seconds_per_minimax_step": round(step_seconds, 3),
        "clips_per_second": round(2 * c / step_seconds, 3),
        "model_gflops_per_step": round(flops / 1e9, 1),
        "executed_gflops_per_step": round(executed / 1e9, 1),
        "achieved_gflops_per_second": round(flops / step_seconds / 1e9, 1),
        "matmul_peak_gflops_per_second": round(peak / 1e9, 1),
        "fraction_of_matmul_peak": round(flops / step_seconds / peak, 3),
        "load_average": round(os.getloadavg()[0], 2),
    }
    if device.startswith("cuda"):
        figures["peak_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
