"""Chapter 09's table of course names, TRL fields and verl keys agrees with the installed TRL and with trl_grpo."""

import dataclasses

import pytest

from course_lib.hf import mapping
from course_lib.hf.loop import HFGRPOConfig, hf_rl_config
from course_lib.hf.trl_contract import LOSS_TYPES
from course_lib.hf.trl_grpo import trl_config


def test_table_agrees_with_installed_trl():
    assert mapping.disagreements() == []


def test_a_changed_trl_default_is_caught(monkeypatch):
    defaults = mapping.installed_trl_defaults()
    monkeypatch.setattr(mapping, "installed_trl_defaults", lambda: {**defaults, "beta": 0.04})
    assert mapping.disagreements() == ["kl_coef: GRPOConfig.beta defaults to 0.04, the chapter says 0.0"]


def test_table_reads_trl_defaults_at_run_time():
    rows = {row["course"]: row for row in mapping.mapping_rows()}
    assert rows["loss_agg"]["trl_default"] == mapping.installed_trl_defaults()["loss_type"]
    assert "num_generations = 8" in mapping.format_table()


@pytest.mark.parametrize("loss_agg", list(LOSS_TYPES))
def test_trl_script_sets_every_mapped_field_from_the_course_value(tmp_path, loss_agg):
    course = HFGRPOConfig(
        rl=hf_rl_config(
            group_size=4,
            prompts_per_step=3,
            update_epochs=2,
            clip_eps=0.3,
            kl_coef=0.05,
            max_new_tokens=12,
            clip_eps_high=0.28,
            temperature=0.9,
            top_p=0.95,
            lr=2e-5,
            max_grad_norm=0.5,
            iterations=7,
            normalize_std=False,
            loss_agg=loss_agg,
        ),
        save_every=3,
    )
    args = trl_config(course, str(tmp_path))
    expected = {
        "num_generations": 4,
        "per_device_train_batch_size": 12,
        "num_iterations": 2,
        "epsilon": 0.3,
        "epsilon_high": 0.28,
        "beta": 0.05,
        "loss_type": LOSS_TYPES[loss_agg],
        "scale_rewards": "none",
        "max_completion_length": 12,
        "temperature": 0.9,
        "top_p": 0.95,
        "learning_rate": 2e-5,
        "max_grad_norm": 0.5,
        "max_steps": 14,
        "save_steps": 6,
        "use_bias_correction_kl": False,
        "steps_per_generation": 1,
        "gradient_accumulation_steps": 1,
    }
    assert {name: getattr(args, name) for name in expected} == expected
    mapped = {mapping.trl_field(trl) for _, _, trl, _, _ in mapping.ROWS} - {None}
    assert mapped <= set(expected)  # every field of the table is set by trl_config
    fields = {f.name for f in dataclasses.fields(HFGRPOConfig)} | {f.name for f in dataclasses.fields(course.rl)}
    course_names = {name for name, *_ in mapping.ROWS if name.isidentifier()} - {"group_advantages"}
    assert course_names <= fields  # every course name in the table is a field of HFGRPOConfig or its rl
