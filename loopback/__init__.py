"""The real engines on loopback: kube-apiserver, etcd, kube-controller-manager and Kueue
v0.19.2 built from the pinned Go modules in tools/, run as a fleet of control planes on
127.0.0.1 without Docker. Every control-plane decision is real; no pod runs (no kubelet)."""
