"""Training: SFT warm-up (:func:`train_sft`) and the RL loop (:func:`train_rl`), with checkpoints, curriculum,
replay and emergency stops. Both take a :class:`~agentic_rl.config.Config` and/or flat field overrides::

    from agentic_rl.train import train_sft, train_rl
    sft = train_sft(run_dir="runs/sft", env_id="tool-use-v0", demos=96, sft_epochs=2)
    rl = train_rl(run_dir="runs/rl", policy=sft.policy, advantage="grpo", iterations=20,
                  progress=lambda m: print(m["iteration"], m["success/train"]))
"""

from agentic_rl.train.rl import RunResult, train_rl
from agentic_rl.train.sft import SFTResult, load_demonstrations, train_sft

__all__ = ["RunResult", "SFTResult", "load_demonstrations", "train_rl", "train_sft"]
