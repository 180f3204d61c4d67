"""Versions of one workflow's code, as deploys ship them: what is in flight (``shop_v1``)
and the changes a deploy may make under it (``shop_v2``), all under one kind."""
