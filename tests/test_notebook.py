"""The quick-start notebook runs from top to bottom without an error (on one backend: the suite
runs once per backend, and the notebook's code does not depend on it)."""

import os
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parents[1] / "examples" / "quickstart.ipynb"


@pytest.mark.skipif(
    os.environ.get("KERAS_BACKEND") != "tensorflow", reason="executed on the TensorFlow run only"
)
def test_quickstart_notebook_executes(tmp_path):
    import nbclient  # test dependencies
    import nbformat

    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()  # raises CellExecutionError naming the failing cell

    outputs = [output for cell in notebook.cells for output in cell.get("outputs", [])]
    images = [output for output in outputs if "image/png" in output.get("data", {})]
    assert len(images) >= 3, "the frames, the trade-off plot and the frame strip are shown inline"
    text = "".join(output.get("text", "") for output in outputs)
    assert "largest difference to the Keras model" in text
    assert (tmp_path / "runs" / "quickstart" / "evaluation" / "report.json").is_file()
    assert (tmp_path / "exported" / "quickstart_anonymizer" / "saved_model.pb").is_file()
