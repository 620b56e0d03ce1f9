"""Turn the H200 reference recordings into kitlib bundles under data/reference/.

Run once by a maintainer (it needs the course's ``shared/reference`` folder):

    python tools/make_reference.py ../shared/reference/h200-2026-11-29

Files are copied byte for byte; each bundle's manifest records where it came from
(PROVENANCE.md of the recording) and every file's sha256. Nothing is edited.
"""
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kitlib.readers.bundle import write_bundle  # noqa: E402

SRC = Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/reference/h200-2026-11-29")
DST = Path(__file__).resolve().parent.parent / "data" / "reference"

PROVENANCE = {
    "gpu": "NVIDIA H200", "gpu_detail": "GH100, 132 SMs, 141 GB HBM3e, 4.81 TB/s, max SM clock 1980 MHz, 700 W",
    "gpu_count": 1, "gpu_memory_bytes": 150109880320, "compute_capability": "9.0",
    "driver": "580.159.04", "cuda": "13.0", "cudnn": 91900, "cupti": "13.0.1",
    "torch": "2.11.0+cu130", "torchvision": "0.26.0+cu130", "python": "3.12.3",
    "os": "Linux 6.18 (Firecracker VM)", "cpu_count": 16, "date": "2026-11-29",
    "nsight_systems": "2025.3.1.0", "nsight_compute": "2025.3.1",
    "tf32": "cudnn.allow_tf32=True (default), cuda.matmul.allow_tf32=False (default), cudnn.benchmark=False",
}
WORKLOAD = {
    "model": "torchvision resnet50(weights=None, num_classes=101)", "channels_last": True,
    "dtype": "float32 (convolutions run TF32 tensor-core kernels)",
    "optimizer": "SGD lr=0.1 momentum=0.9 weight_decay=1e-4", "loss": "cross_entropy",
    "batch_size": 128,
    "dataset": "synthetic: 1,792 JPEGs (quality 90, 512 x 384-512 px), 101 classes, cut from 9 scikit-image sample photographs",
    "transform": "RandomResizedCrop(224), RandomHorizontalFlip, ToTensor, Normalize(ImageNet)",
    "num_workers": 8, "pin_memory": True, "persistent_workers": False, "shuffle": True, "drop_last": True,
    "labels": ["data_load", "h2d", "forward", "backward", "optimizer"],
    "data_load_covers": "next(batches) only",
}
FULL = {"record_shapes": True, "profile_memory": True, "with_stack": True, "with_flops": True}
NOTE = "H200 reference recording of 2026-11-29 (see PROVENANCE.md beside this folder)."

BUNDLES = [
    ("profiler_5step", "torch_profiler",
     {"activities": ["CPU", "CUDA"], "schedule": {"wait": 1, "warmup": 1, "active": 5}, **FULL},
     {}, {
         "trace.json.gz": "torch.profiler Chrome trace, ProfilerStep#2-#6 (73,507 events)",
         "key_averages_tables.txt": "the profiler's own printed key_averages tables (by name, input shape, stack, memory)",
         "step_times.json": "wall-clock step times in ms (perf_counter + cuda.synchronize): uninstrumented with loader, fixed batch, under this profiler",
         "memory_snapshot.pickle": "torch.cuda.memory._dump_snapshot() after 3 further steps, _record_memory_history(max_entries=60000)",
     }, "Warm model and loader."),
    ("cold_start_8step", "torch_profiler",
     {"activities": ["CPU", "CUDA"], "schedule": None, "record_shapes": False, "profile_memory": False,
      "with_stack": False, "with_flops": False, "step_label": "torch_step#N"},
     {}, {
         "trace.json.gz": "torch.profiler Chrome trace, steps 0-7 from a freshly created DataLoader, each in torch_step#N",
         "wallclock.json": "perf_counter_ns stamps around each next() and after each step's submission (independent of the profiler)",
     }, "Cold start: the DataLoader is created inside the recording."),
    ("fixed_batch", "torch_profiler",
     {"activities": ["CPU", "CUDA"], "schedule": {"wait": 1, "warmup": 1, "active": 5}, **FULL},
     {"dataset": "one fixed on-device batch (no DataLoader)", "num_workers": 0}, {
         "trace.json.gz": "torch.profiler Chrome trace of 5 active steps on one fixed batch",
         "key_averages.json.gz": "the profiler's key_averages() rows as JSON: by_name, by_input_shape, by_stack_5 (times in us, memory in bytes, flops)",
         "flop_counter_one_step.json": "torch.utils.flop_counter.FlopCounterMode totals for one training step (forward+backward)",
         "memory_timeline.raw.json.gz": "export_memory_timeline raw rows",
     }, "3 warm-up steps, FlopCounterMode over one step, then the profiler. "
        "78 GPU events at the start of the window belong to the warm-up step: their launches were made before recording began."),
    ("nsys_8step", "nsys",
     {"command": "nsys profile -t cuda,nvtx,osrt --osrt-threshold=10000 --sample=none --cpuctxsw=none python ...",
      "collectors": {"cuda": True, "nvtx": True, "osrt": True, "osrt_threshold_ns": 10000,
                     "cpu_sampling": False, "context_switches": False, "cuda_memory_usage": False},
      "nvtx_ranges": "push/pop torch_step > {data_load, forward, backward, optimizer}"},
     {"data_load_covers": "next(batches) and the .to(device, non_blocking=True) transfer submission",
      "labels": ["torch_step", "data_load", "forward", "backward", "optimizer"]}, {
         "report.sqlite": "nsys export --type sqlite of the 8-step cold-start run",
         **{f"nsys_stats/{n}.csv": f"nsys stats --format csv --report {n} on report.sqlite" for n in
            ["nvtx_sum", "nvtx_gpu_proj_sum", "cuda_gpu_kern_sum", "cuda_kern_exec_sum", "cuda_api_sum",
             "cuda_gpu_mem_time_sum", "cuda_gpu_mem_size_sum", "osrt_sum"]},
     }, "8 steps from a cold DataLoader; no torch.profiler. (The recording's empty nsys_stats/sum.csv is not copied.) "
        "The export's own metadata names Nsight Systems 2025.3.2.0, PROVENANCE.md 2025.3.1.0."),
    ("nsys_emit_nvtx", "nsys",
     {"command": "nsys profile -t cuda,nvtx --capture-range=cudaProfilerApi --capture-range-end=stop python ...",
      "emit_nvtx": {"record_shapes": True},
      "collectors": {"cuda": True, "nvtx": True, "osrt": False, "cpu_sampling": None, "context_switches": None}},
     {"dataset": "one fixed on-device batch (no DataLoader)", "num_workers": 0}, {
         "report.sqlite": "nsys export --type sqlite; torch_step#3 and #4 under emit_nvtx(record_shapes=True)",
         **{f"nsys_stats/{n}.csv": f"nsys stats --format csv --report {n} on report.sqlite" for n in
            ["nvtx_sum", "nvtx_gpu_proj_sum", "cuda_gpu_kern_sum"]},
     }, "3 warm steps, then torch.cuda.profiler.start(), 2 steps, stop()."),
    ("ncu", "ncu",
     {"command": "ncu --clock-control none -k regex:conv --launch-count 3 --section SpeedOfLight "
                 "--section LaunchStats --section Occupancy --csv --page details"},
     {}, {"conv_kernels_speed_of_light.csv": "first three kernels whose name matches conv, one forward/backward"},
     ""),
]


def main():
    DST.mkdir(parents=True, exist_ok=True)
    shutil.copy(SRC / "PROVENANCE.md", DST / "PROVENANCE.md")
    hc = DST / "how_captured"
    hc.mkdir(exist_ok=True)
    for f in (SRC / "how_captured").iterdir():
        shutil.copy(f, hc / f.name)
    for name, kind, recipe, wl, files, notes in BUNDLES:
        out = DST / name
        out.mkdir(exist_ok=True)
        for fname in files:
            (out / fname).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(SRC / name / fname, out / fname)
        write_bundle(out, kind=kind, name=name, files=files, recipe=recipe,
                     workload={**WORKLOAD, **wl}, provenance=PROVENANCE, origin="recorded",
                     notes=(NOTE + " " + notes).strip(),
                     extra={"source": f"shared/reference/h200-2026-11-29/{name}"})
        print("wrote", out)


if __name__ == "__main__":
    main()
