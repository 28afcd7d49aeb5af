"""The catalog: what exists (streams, roles, server policies) and landing bookkeeping.

Pure Python (no pyspark): the landing zone, the CLI and the Spark driver all read it.
"""

from streamshield.catalog.store import (
    Catalog,
    CatalogError,
    SqlCatalog,
    SqliteCatalog,
    StreamExists,
    UnknownStreamError,
)
from streamshield.catalog.streams import SPARK_TYPES, StreamDefinition

__all__ = [
    "SPARK_TYPES",
    "Catalog",
    "CatalogError",
    "SqlCatalog",
    "SqliteCatalog",
    "StreamDefinition",
    "StreamExists",
    "UnknownStreamError",
]
