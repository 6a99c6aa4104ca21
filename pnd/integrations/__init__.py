"""Integrations of pnd into other tools: `pnd.integrations.lmms_eval` (lmms-eval models)."""
