"""Migration of legacy weekly-named jobs into episodes: the legacy format, the manifest, plan/apply,
and the verification that nothing of the legacy tree was lost.

Above the stores: it allocates through a store's own lock and reads its files; no store imports it.
"""
