"""The Arrow type that carries each column type of `readmodels.graph.properties` into LadybugDB.

Apart from the properties, so that what only reads the graph (retrieval, the query client, the CLI) does not
import pyarrow.
"""

from __future__ import annotations

from typing import Final

import pyarrow as pa

ARROW_TYPES: Final[dict[str, pa.DataType]] = {
    "STRING": pa.string(),
    "INT64": pa.int64(),
    "DOUBLE": pa.float64(),
    "BOOLEAN": pa.bool_(),
    "STRING[]": pa.list_(pa.string()),
    "INT64[]": pa.list_(pa.int64()),
}
"""The Arrow type that carries each column type into LadybugDB (`LOAD FROM` and `COPY`)."""
