"""One source of truth for what the image holds: requirements.lock agrees with pyproject.toml, and the
Dockerfile, ``make image`` (image/spec.py) and the controller chart describe the same image. No build, no
root: these run everywhere."""

from __future__ import annotations

import importlib.metadata
import json
import re
import tomllib

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from image import spec
from tests.paths import REPO_ROOT

PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
VERSION = PYPROJECT["project"]["version"]
LOCK_LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\;]+)")


def locked() -> dict[str, str]:
    """Package name (canonical) -> version, from requirements.lock."""
    pins: dict[str, str] = {}
    for line in (REPO_ROOT / "requirements.lock").read_text().splitlines():
        match = LOCK_LINE.match(line)
        if match:
            pins[canonicalize_name(match[1])] = match[2]
    return pins


def lock_entries() -> dict[str, str]:
    """Package name (canonical) -> its whole entry (the pin and its --hash lines)."""
    text = (REPO_ROOT / "requirements.lock").read_text()
    entries: dict[str, str] = {}
    for block in re.split(r"\n(?=[A-Za-z0-9])", text):
        match = LOCK_LINE.match(block)
        if match:
            entries[canonicalize_name(match[1])] = block
    return entries


def dockerfile() -> list[tuple[str, str]]:
    """The Dockerfile's instructions as (INSTRUCTION, arguments), continuation lines joined."""
    text = re.sub(r"\\\n", " ", (REPO_ROOT / "Dockerfile").read_text())
    instructions = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            keyword, _, rest = stripped.partition(" ")
            instructions.append((keyword.upper(), " ".join(rest.split())))
    return instructions


def runtime_stage() -> list[tuple[str, str]]:
    instructions = dockerfile()
    last_from = max(i for i, (keyword, _) in enumerate(instructions) if keyword == "FROM")
    return instructions[last_from:]


def key_values(arguments: str) -> dict[str, str]:
    """ENV or LABEL arguments: key=value pairs, values possibly double-quoted."""
    return {key: value.strip('"') for key, value in re.findall(r'([\w.]+)=("[^"]*"|\S*)', arguments)}


def test_the_lock_pins_every_runtime_dependency_at_the_version_pyproject_names() -> None:
    pins = locked()
    for text in PYPROJECT["project"]["dependencies"]:
        requirement = Requirement(text)
        (specifier,) = requirement.specifier
        assert specifier.operator == "==", f"pyproject.toml pins {requirement.name} exactly"
        assert pins.get(canonicalize_name(requirement.name)) == specifier.version, (
            f"requirements.lock disagrees with pyproject.toml on {requirement.name}: regenerate it with `make lock`"
        )


def test_every_locked_package_has_hashes_to_check() -> None:
    unhashed = [name for name, entry in lock_entries().items() if "--hash=sha256:" not in entry]
    assert unhashed == []


def test_the_lock_holds_every_dependency_of_what_it_locks() -> None:
    # Read from the installed metadata (the dev environment is installed under the lock's constraints): each
    # locked package's requirements, and the extras pyproject asks for, are locked too.
    pins = locked()
    wanted = [Requirement(text) for text in PYPROJECT["project"]["dependencies"]]
    missing: set[str] = set()
    for requirement in wanted:
        missing |= _unlocked_requirements(requirement.name, requirement.extras, pins)
    for name in pins:
        missing |= _unlocked_requirements(name, set(), pins)
    assert missing == set(), "requirements.lock is not closed: regenerate it with `make lock`"


def _unlocked_requirements(name: str, extras: set[str], pins: dict[str, str]) -> set[str]:
    found: set[str] = set()
    for text in importlib.metadata.requires(name) or []:
        dependency = Requirement(text)
        marker = dependency.marker
        applies = marker is None or any(marker.evaluate({"extra": extra}) for extra in [*extras, ""])
        if applies and canonicalize_name(dependency.name) not in pins:
            found.add(f"{dependency.name} (needed by {name})")
    return found


def test_the_environment_the_tests_run_in_has_the_locked_versions() -> None:
    # The Makefile installs the dev environment with the lock as constraints: what the tests exercise is
    # what the image ships.
    differing = {
        name: (version, importlib.metadata.version(name))
        for name, version in locked().items()
        if importlib.metadata.version(name) != version
    }
    assert differing == {}, "reinstall the environment: make clean && make test"


def test_the_dockerfile_installs_from_the_lock_with_hashes_and_the_same_slimming() -> None:
    runs = [arguments for keyword, arguments in dockerfile() if keyword == "RUN"]
    assert any("--require-hashes" in run and "requirements.lock" in run for run in runs)
    assert any("slim.py /opt/arc-scaleset" in run for run in runs)
    assert any("--invalidation-mode unchecked-hash" in run for run in runs)


def test_the_dockerfile_runtime_stage_has_the_user_entrypoint_and_environment_of_make_image() -> None:
    stage = runtime_stage()
    values = {keyword: arguments for keyword, arguments in stage if keyword in ("USER", "WORKDIR")}
    assert values == {"USER": spec.USER, "WORKDIR": spec.WORKDIR}
    assert [json.loads(a) for k, a in stage if k == "ENTRYPOINT"] == [list(spec.ENTRYPOINT)]
    assert [json.loads(a) for k, a in stage if k == "CMD"] == [list(spec.CMD)]
    env: dict[str, str] = {}
    for keyword, arguments in stage:
        if keyword == "ENV":
            env |= key_values(arguments)
    assert env == dict(entry.split("=", 1) for entry in spec.ENV)
    assert any(
        keyword == "COPY" and arguments.startswith("--from=build") and spec.PREFIX in arguments
        for keyword, arguments in stage
    )


def test_the_dockerfile_labels_are_those_of_make_image() -> None:
    stage = runtime_stage()
    labels: dict[str, str] = {}
    for keyword, arguments in stage:
        if keyword == "LABEL":
            labels |= key_values(arguments)
    args = dict(arguments.partition("=")[::2] for keyword, arguments in stage if keyword == "ARG")
    expected = spec.labels(version=VERSION, revision="", created="")
    del expected["org.opencontainers.image.created"]  # Docker records the build time itself
    assert args["VERSION"] == VERSION, "the Dockerfile's default VERSION follows pyproject.toml"
    assert labels.pop("org.opencontainers.image.version") == "${VERSION}"
    assert labels.pop("org.opencontainers.image.revision") == "${REVISION}"
    del expected["org.opencontainers.image.version"]
    assert labels == expected


def test_both_builds_use_debian_bookworms_python() -> None:
    args = {
        name: value
        for keyword, arguments in dockerfile()
        if keyword == "ARG"
        for name, _, value in [arguments.partition("=")]
    }
    assert args["BUILD_IMAGE"].startswith(f"debian:{spec.SUITE}-slim@")
    assert args["RUNTIME_IMAGE"].startswith("gcr.io/distroless/python3-debian12:nonroot@")  # Debian 12 is bookworm
    assert spec.SUITE == "bookworm"
    assert spec.PYTHON == "/usr/bin/python3.11"


def test_every_base_image_is_pinned_by_digest() -> None:
    """A tag moves: only a digest names the bytes a build starts from (``ARG`` defaults resolved)."""
    args: dict[str, str] = {}
    stages: set[str] = set()
    pinned = re.compile(r"^[a-z0-9./-]+(:[\w.-]+)?@sha256:[0-9a-f]{64}$")
    for keyword, arguments in dockerfile():
        if keyword == "ARG":
            name, _, value = arguments.partition("=")
            args.setdefault(name, value)
        elif keyword == "FROM":
            words = arguments.split()
            image = re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args.get(m[1] or m[2], ""), words[0])
            if len(words) == 3 and words[1].upper() == "AS":
                stages.add(words[2])
            if image not in stages:
                assert pinned.match(image), f"FROM {words[0]} ({image}) is not pinned by digest"


@pytest.mark.parametrize("source", ["pyproject.toml", "README.md", "requirements.lock", "image/slim.py"])
def test_the_docker_context_lets_in_what_the_dockerfile_copies(source: str) -> None:
    copied = " ".join(arguments for keyword, arguments in dockerfile() if keyword == "COPY")
    assert source in copied
    assert f"!{source}" in (REPO_ROOT / ".dockerignore").read_text().splitlines()


def test_the_controller_chart_pulls_the_image_make_image_tags_by_default() -> None:
    chart = REPO_ROOT / "charts" / "gha-runner-scale-set-controller"
    values = yaml.safe_load((chart / "values.yaml").read_text())
    metadata = yaml.safe_load((chart / "Chart.yaml").read_text())
    assert values["image"]["repository"] == spec.REPOSITORY
    assert values["image"]["tag"] == "", "the tag defaults to the chart's appVersion"
    assert metadata["appVersion"] == VERSION, "the chart's appVersion is the version make image tags"
