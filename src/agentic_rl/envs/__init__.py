"""Built-in environments. Each module registers nothing itself: the ids live here, imported lazily."""

from agentic_rl.env.registry import register

register("tool-use-v0", "agentic_rl.envs.tool_use:ToolUseEnv",
         "API/tool simulator: calculator, knowledge-base lookup, unit conversion; decide when to call which tool")
register("workflow-v0", "agentic_rl.envs.workflow:WorkflowEnv",
         "Cross-system workflow: orchestrate stateful mock CRM, billing and mail services")
register("web-v0", "agentic_rl.envs.web:WebShopEnv",
         "Generated shop website as text: search, browse, pick the item matching constraints or extract a fact")
register("world-v0", "agentic_rl.envs.world:GridWorldEnv",
         "Partially observable grid world: explore, find the key, open the door, reach the goal")
register("code-repair-v0", "agentic_rl.envs.code_repair:CodeRepairEnv",
         "Repair a buggy Python file in a sandbox; reward from hidden tests (compile/partial/all/new-error)")
register("shell-v0", "agentic_rl.envs.shell:ShellEnv",
         "OS/shell tasks on a generated directory tree in a sandbox; count, find, extract, reorganise")
