"""The ``actions.github.com/v1alpha1`` API: the four kinds as pydantic models, their keys and child names,
and the CRDs generated from them.

Modules: :mod:`~arc_scaleset.api.common` (value types, metadata, base classes), one module per kind,
:mod:`~arc_scaleset.api.keys` (labels, annotations, finalizers, phases), :mod:`~arc_scaleset.api.naming`
(child object names), :mod:`~arc_scaleset.api.labels` (label/annotation derivation),
:mod:`~arc_scaleset.api.versions` (the version gate), :mod:`~arc_scaleset.api.crd` (CRD generation and checks),
:mod:`~arc_scaleset.api.listener_config` (the listener's ``config.json``, written by the controller and read by
the listener; plain dataclasses, with :mod:`~arc_scaleset.api.listener_metrics` for its ``metrics`` section),
:mod:`~arc_scaleset.api.semantic` (semantic equality with the field rules of ARC's types),
:mod:`~arc_scaleset.api.views` (zero-copy views of the four kinds over cached objects).

Import each name from the module that defines it (``from arc_scaleset.api.constants import
EPHEMERAL_RUNNERS``, ``from arc_scaleset.api.autoscalingrunnerset import AutoscalingRunnerSet``): this package
exports nothing, so importing it, or a light module of it (:mod:`~arc_scaleset.api.constants`,
:mod:`~arc_scaleset.api.listener_config`), does not build the kinds' pydantic models. The listener process needs
none of them, and they would cost it about 1 MB (issue 20).
"""
