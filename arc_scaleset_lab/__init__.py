"""The lab: everything that lets anyone run, test and measure arc-scaleset on one machine.

- :mod:`arc_scaleset_lab.cluster`: a real Kubernetes control plane on loopback, built from pinned Go modules;
- :mod:`arc_scaleset_lab.sim`: a simulated GitHub + Actions service speaking the real protocol;
- :mod:`arc_scaleset_lab.node`: the fake node's kubelet part (listener processes, runner pods);
- :mod:`arc_scaleset_lab.demo`: ``arc-scaleset demo``;
- :mod:`arc_scaleset_lab.harness`: what the test suites, the benchmarks and the demo share.

Installed with ``pip install 'arc-scaleset[lab]'``. The operator (:mod:`arc_scaleset`) never imports it;
the lab's commands reach ``arc-scaleset`` through the entry point in :mod:`arc_scaleset_lab.cli`.
"""
