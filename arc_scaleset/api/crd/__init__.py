"""The CRD tooling: the four CustomResourceDefinitions generated from the API models, and the checks on them.

:mod:`~arc_scaleset.api.crd.generate` builds and renders the CRDs (``arc-scaleset crds``,
:mod:`~arc_scaleset.api.crd.command`, writes ``config/crd/``) from the pydantic models, through
:mod:`~arc_scaleset.api.crd.structural` (pydantic JSON schema -> structural OpenAPI) and
:mod:`~arc_scaleset.api.crd.k8s_schema` (the built-in Kubernetes types' schemas).
:mod:`~arc_scaleset.api.crd.compat` says whether a new CRD breaks objects stored under an old one, and
:mod:`~arc_scaleset.api.crd.installed` whether the CRDs installed in a cluster are this version's.

Nothing outside this package needs it at run time except the controller's start-up check: the listener never
imports it.
"""
