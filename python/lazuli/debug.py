"""Debug and metrics. Nothing here compiles or runs a program."""
from ._C.debug import (  # noqa: F401
    metrics_report, short_metrics_report, counter_value, metric_data, counter_names,
    metric_names, clear_counters, clear_metrics, tensor_state, graph_hash, dump_graph, dump_kernels,
    live_tensor_count, explain_recompiles, recent_cuts, profile_programs, profiling_programs,
    program_profile, program_profile_report, clear_program_profile, clear_recent_cuts, clear_recompile_history,
    _clear_compile_cache, _set_config, _get_config,
)
