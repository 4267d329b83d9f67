import sys, importlib, torch
sys.path.insert(0, "evals/bench")
from run_bench import write_call, write_case
w = importlib.import_module("atom_mxfp4.kernels.triton.qknorm_rope_write")
for cfg in (w.write_config(8192), w.WriteConfig(4, 2, 2, 64, early_loads=True)):
    for mode, ik in (("ceil", "mxfp4"), ("mse", "fp8")):
        weights, cos_sin, sets, per_call = write_case(8192, ik, budget=2**27)
        write_call(w, weights, cos_sin, sets[0], mode, ik, cfg)(); torch.cuda.synchronize()
