"""Validation engine: compare distributed runs with the single-process reference, auto-fix the spec,
and explain what differs (`trace_and_validate`, `validate_on_cpu`, `validate_launched` under torchrun).

Modules
=======

Entry points and the pipeline:

- `api`: `trace_and_validate` and `validate_on_cpu`, the library's entry points;
- `launched`: `validate_launched`, across the ranks a launcher started;
- `run_setup`: what is settled before any process starts (options, factory, sample, devices, prior);
- `engine`: the pipeline behind every entry point (`run_validation`);
- `executor`: the runs one validation asks for (`Executor`) and which processes serve them;
- `rank_runs`: how a validation's own ranks start: its spares, `RANK_INSTRUMENTATION`;
- `attempt_ahead`: the first attempt run while the reference runs, taken when its spec holds;
- `deadline`: `timeout_sec` per run, `deadline_sec` for the whole validation.

The reference and what is read off it:

- `reference`: the single-process reference run, in a child of the warm pool;
- `reference_field`: the receptive-field measurement, off the critical path;
- `receptive`: the measured receptive field against the declared one;
- `receptive_graph`: the measurement's cutoff graph, displacements, hop distances and distances in Å;
- `receptive_floor`: the measurement's noise floor (dtype round-off, where the model spreads it);
- `receptive_reach`: whether a measured reach is explained by more hops or by a longer cutoff;
- `receptive_isolated`: the probes displaced again with nothing within the declared cutoff (depth or cutoff);
- `field_record`: the measurement's typed record, and the halo set from it before the first run;
- `field_advice`: the remedy's text for an under-declared receptive field (depth or cutoff);
- `field_cache`: receptive-field measurements remembered for the same model and sample;
- `inference`: spec inference: the wrapper's spec is the prior, the rest read off the reference;
- `outputs`: what the validator requires of the wrapper's outputs;
- `sample_checks`: samples that allow only a weaker check (zero forces, no cell);
- `helpers`: the helper trace of watched third-party packages;
- `diagnosis`: what each watched helper does and whether it is safe distributed.

An attempt:

- `instrument`: what runs inside each rank: helper trace and layer records;
- `layers`: forward hooks on every sub-module, reduced to what compares across ranks;
- `op_trace`: the first torch op whose value departs, from the op traces of the reference and the ranks;
- `attempt_records`: one attempt's report record from what its ranks returned;
- `diff`: distributed outputs against the reference, element by element;
- `replicas`: replicated outputs compared rank against rank;
- `health`: partition health and halo completeness;
- `sensitivity`: the round-off floor and suspicious outputs;
- `model_identity`: did the reference and every rank build the same model;
- `crash`: what a crashed attempt keeps (`worker_error`);
- `failure`: a rank's failure as the hint rules read it (`Failure`);
- `errors`: a rank's failure → a short, actionable hint.

Auto-fix and the report's advice:

- `autofix`: the rule-based spec mutations, in order (`RULES`);
- `custom_op_rule`: the `declare_custom_ops` rule for undeclared `torch.ops` kernels (not in `RULES` yet);
- `function_rule`: the `function_to_local` rule for aggregations inside a `torch.autograd.Function`;
- `owned_complete`: the rules into and out of scatter mode `owned_complete`;
- `halo_bounds`: how far a halo may be widened; the rule back from `local` for edge virials;
- `rollback`: rolling back a mutation that made the comparison worse;
- `fix_record`: what the pipeline changed in the spec as given, each attempt's fixes;
- `unrouted`: what to say and do about unrouted aggregations;
- `next_action`: the report's `next_action`, ranked by cause;
- `evidence`: the evidence `next_action` shows;
- `trust_action`: `next_action` lines of the trust checks.
"""

from .api import DEFAULT_WATCHED_HELPERS, trace_and_validate, validate_on_cpu
from .launched import validate_launched

__all__ = ["DEFAULT_WATCHED_HELPERS", "trace_and_validate", "validate_launched", "validate_on_cpu"]
