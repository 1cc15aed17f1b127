"""Whether torchrun can start its rendezvous store with this torch: a TCPStore server made as
torchrun's static and c10d rendezvous make it (torch 2.6: elastic/rendezvous/
static_tcp_rendezvous.py and c10d_rendezvous_backend.py pass no use_libuv, so the store's own
default, libuv, applies and USE_LIBUV is not read).

Exit 0: it starts. Exit 3: this torch is built without libuv (Debian 13's 2.6), so no torchrun
starts, with or without topo-aware; the line printed says so with torch's own message. Any other
failure exits 1 with its message: the callers leave that to their checks.
Used by tests/e2e/clients.sh and scripts/release-lab.sh."""
import sys
from datetime import timedelta

LIBUV_MISSING = "use_libuv was requested but PyTorch was build without libuv"

try:
    import torch
    from torch.distributed import TCPStore
    TCPStore("127.0.0.1", 29577, 1, True, timedelta(seconds=5), multi_tenant=True)
except Exception as e:  # noqa: BLE001 -- any failure is reported, only one is classified
    msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    if LIBUV_MISSING in msg:
        print(f"this torch ({torch.__version__}) cannot start the TCPStore torchrun's "
              f"rendezvous makes: {msg}")
        sys.exit(3)
    print(f"{type(e).__name__}: {msg}")
    sys.exit(1)
