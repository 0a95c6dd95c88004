"""Every process distcheck starts, who ends it, and what kills it when its owner dies.

The *owner* is the process that asks for a validation: the CLI, the editor's runner, or a user's own
script or notebook calling `trace_and_validate`. Everything below it forms one tree (`lifeline`):
owner → forkserver → spares, ranks, reference → whatever the model starts. Nothing outlives the owner,
SIGKILL included, and each validation gives exactly the verdict a fresh process would give (the
warm-equals-cold invariant in `../shared/DESIGN.md`, checked by `tests/server/runtime/test_warm_cold.py`).

Process kinds
=============

Each kind: who starts it; who ends it; what kills it when its owner dies.

- **daemon** (`lsp/`, `distcheck-lsp` over stdio): the editor; `shutdown`/`exit`, stdin closing,
  SIGTERM/SIGHUP; stdin closes, and it kills its runner's tree (`lsp.runner_tree.kill_all`). Once a
  runner has exited, however, the daemon removes that runner's run directories (`run_dirs`), which a
  killed runner and its killed forkserver could not (`lsp.runner_client.RunnerClient.sweep`).
- **runner** (`jobs/runner.py`): the daemon (`lsp/runner_slot.py`); the daemon (shutdown, restart, a
  target it may not serve), or itself; its watchdog sees the daemon gone, kills what it started and
  exits (removing its run directories first). It imports its target's code (factory, sample) into its
  own process, so it serves that target only (`jobs/serving.py`): another target's validation goes to a
  *standby* runner the daemon started ahead (torch and its pool warm, no user code) or a fresh one, and
  a runner refuses one itself; after a validation whose code changed what cannot be put back (a torch
  function or hook, an op: `isolation.torch_surface`; the inter-op threads) it answers with `"retire"`
  and exits.
- **forkserver** (`forkserver.process_context`, the owner's first start): the owner;
  `teardown.end_helpers` (CLI) or the owner's exit; `OWNER_GONE_SIGNAL`, a parent-death signal: it
  kills its subtree and removes the owner's run directories (`lifeline.arm_forkserver`), its own
  socket's among them (`run_dirs.multiprocessing_dir`).
- **resource tracker** (multiprocessing's, beside the forkserver): the owner's exit, `teardown`; it
  sees its pipe close and exits.
- **spare** (`spares`): the keeper thread forks it from the forkserver; it ends itself after its one
  job, on `("exit",)`, EOF or `idle_timeout_s`, or `pool.trim`; SIGKILL when the forkserver dies.
- **reference** (`validate/reference.run_reference`): a spare or a fork of the forkserver; the
  validation once the receptive field is collected, or `supervise`; SIGKILL with the forkserver.
- **rank** (`launch.run_distributed`): a spare, prepared spares or a fork; its lifecycle (below),
  `supervise` on a failure or timeout, `reaper` at the end; SIGKILL with the forkserver, and on its
  way out it kills what the model left running (`lifeline.kill_tree`).
- **launched rank** (`runtime/group.py`): `torchrun` or another launcher; the launcher; the launcher's
  rules, not ours.

Rank lifecycles
===============

How the ranks of one run came to be is `runtime.run_result.RankLifecycle`, recorded on each
`DistributedRun` (`DistributedRun.lifecycle`) and in the attempt's timings. `run_distributed` asks
the run's `rank_source.RankSource` which it is (`NEW_RANKS` by default; a validation's
`ValidationRanks` offers its resident and prepared ranks):

- `FRESH`: forked from the forkserver for this run; ends with it.
- `SPARE`: a warm spare claimed for this run (`spares.process`); ends with it.
- `PREPARED`: spares that became their ranks and built the wrapper while the reference ran
  (`spares.prepared`); used only for the run they were built for, else discarded.
- `RESIDENT`: ranks of an earlier run of this validation kept alive for its next run (`resident`);
  the user's modules are forgotten and the global state put back between runs, and a run whose import
  changed what cannot be put back (torch's functions, hooks, registered ops, inter-op threads:
  `isolation.torch_surface`, against a baseline taken before the first user import, also a prepared
  spare's) retires them (`resident.RETIRING`), which the attempt's timings say
  (`run_result.RETIRED_TIMING`); the next run starts fresh ranks, where that import applies once.
- `LAUNCHED`: ranks a launcher started (`runtime/group.py`); they run every attempt of the job.

The first attempt may run *ahead*, while the reference runs, under the spec the target's last
validation started with (`validate/attempt_ahead.py`): its ranks are `PREPARED` or `FRESH` ones, and
the run is taken only when the spec inferred now is the same (`ran_ahead` in the attempt's timings).

Modules
=======

- `forkserver`: the warm pool every process starts from, and the lock around each start (no torch);
- `forkserver_init`: the forkserver's first import: the import guard, the bytecode cache;
- `mode_warmup`: the forkserver's last imports: what torch loads lazily under a rank's modes;
- `preloaded`: what the forkserver imported for every process, recorded once it had;
- `bytecode_cache`: bytecode for installed packages that have none;
- `launch`: `run_distributed`, the owner's side of one run;
- `rank_main`: a rank process's body: first and last steps, its runs, result and error files;
- `rank_source`: where a run's ranks come from (`RankWant` → `RankChoice`);
- `caller_context`: what every job carries of its caller (environment, working directory,
  `sys.path` when the run starts), applied first in whatever process serves it; the variables that
  only take effect at a process's start, whose change restarts the forkserver;
- `supervise`: waiting for a run's processes, naming the culprit, stopping the rest;
- `reaper`: ending what a validation is done with (off its path on a GPU);
- `teardown`: a command's last step: everything it started has ended;
- `lifeline`: no process outlives its owner (parent-death signals, subreapers, tree kills);
- `process_groups`: killing whole process groups (standard library only);
- `run_dirs`: a private directory per run (and the forkserver's socket's), and the sweep of those whose
  owner is gone;
- `resident`: ranks kept between the runs of one validation;
- `spares`: warm processes forked ahead (its docstring maps its modules).
"""
