"""Per-call cost of gc_cpp.graph_conv on a 16-node graph: dispatch, checks and autograd, when
the products are tiny. `nox -s abi_overhead` runs it under the stable-ABI build and the last
full-ABI one: OMP_NUM_THREADS=1 python THIS_FILE
"""

from __future__ import annotations

import json
import warnings

import torch
import torch.utils.benchmark as benchmark

import gc_cpp

warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")


def median_us(stmt: str, **names) -> float:
    timer = benchmark.Timer(stmt, globals={"gc_cpp": gc_cpp, "torch": torch, **names})
    return timer.blocked_autorange(min_run_time=1.0).median * 1e6


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    n, f_in, f_out = 16, 8, 4
    dense = (torch.rand(n, n) < 0.3).float()
    x, w, b = torch.randn(n, f_in), torch.randn(f_in, f_out), torch.randn(f_out)
    w_grad = w.clone().requires_grad_(True)
    results = {}
    for layout, adj in (("dense", dense), ("csr", dense.to_sparse_csr())):
        args = (adj, x, w, b)
        results[f"{layout}: graph_conv, no input requires grad"] = median_us(
            "gc_cpp.graph_conv(*args)", args=args
        )
        results[f"{layout}: the same under inference_mode (no autograd kernel)"] = median_us(
            "with torch.inference_mode(): gc_cpp.graph_conv(*args)", args=args
        )
        results[f"{layout}: forward + backward, weight requires grad"] = median_us(
            "gc_cpp.graph_conv(*args).sum().backward()", args=(adj, x, w_grad, b)
        )
    results["dense: eager torch.addmm(b, adj, x @ w), the peer"] = median_us(
        "torch.addmm(b, adj, x @ w)", adj=dense, x=x, w=w, b=b
    )
    info = gc_cpp.BUILD_INFO
    print(json.dumps({"abi": info.get("abi", "full"), "torch": torch.__version__, "us": results}))


if __name__ == "__main__":
    main()
