"""`mepgen capture`: record the real inputs and outputs of one kernel launch from a run of the application.

Synthetic inputs cannot reproduce data-dependent kernels (sparse matrices, graph frontiers, neighbour lists) nor
prove that a variant computes what the application needs; a capture gives the MEP exactly the data one launch saw
and the outputs it produced. The pieces, in the order a capture uses them:

- toolkit.py / build.py: find the CUDA toolkit and build the CUPTI injector (injector/capture.cpp), cached;
- names.py / plan.py: resolve the kernel the user named and write the injector's plan (refusing what a replay
  cannot reproduce);
- launcher.py: run the application under CUDA_INJECTION64_PATH and explain a capture that did not happen;
- convert.py: the raw dumps -> `data/captured/` (`before/`, `after/`, manifest.json);
- use.py: point mep.yaml at the captured data.
"""
