import sys, runpy
sys.path.insert(0, 'src')
from dsattn import _checks
def _noop(*a, **k):
    return None
mode = sys.argv.pop(1)
if mode == "nocheck":
    _checks.check_tensor.__code__ = _noop.__code__
    _checks.check_tensor.__defaults__ = None
    _checks.check_tensor.__kwdefaults__ = None
sys.argv[0] = 'bench/layer_host_cost.py'
runpy.run_path('bench/layer_host_cost.py', run_name='__main__')
