import sys
from pathlib import Path

# Let the autoscaler tests import their builders (scalekit.py) from this folder.
sys.path.insert(0, str(Path(__file__).parent))
