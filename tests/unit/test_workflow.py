"""The GitHub workflow validates against the GitHub Actions schema and builds/deploys as intended."""

import subprocess
import sys
from pathlib import Path

import yaml

WORKFLOW = Path(__file__).resolve().parents[2] / ".github" / "workflows" / "book.yml"


def test_workflow_matches_the_github_schema():
    result = subprocess.run(
        [str(Path(sys.executable).parent / "check-jsonschema"), "--builtin-schema", "vendor.github-workflows",
         str(WORKFLOW)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_workflow_builds_with_warnings_as_errors_and_deploys_from_main():
    flow = yaml.safe_load(WORKFLOW.read_text())
    triggers = flow[True]  # YAML 1.1 reads the key `on` as True
    assert "pull_request" in triggers and triggers["push"]["branches"] == ["main"]
    steps = "\n".join(str(step) for step in flow["jobs"]["build"]["steps"])
    assert "jupyter-book build . --all -W --keep-going" in steps
    assert "download.pytorch.org/whl/cpu" in steps  # CPU torch, never the CUDA build
    assert "upload-pages-artifact" in steps
    assert flow["jobs"]["deploy"]["permissions"] == {"pages": "write", "id-token": "write"}
