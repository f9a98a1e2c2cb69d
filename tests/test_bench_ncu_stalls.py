"""bench/ncu_stalls.py (written before any ncu source page was read here) on a CSV of the form ncu prints:
samples summed per instruction, partition (the stretch after a setmaxnreg marker) and opcode; an unknown format
says so instead of failing."""
import importlib.util
import os

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("ncu_stalls", os.path.join(HERE, "..", "bench", "ncu_stalls.py"))
ncu_stalls = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ncu_stalls)

CSV = '''"Kernel Name","sparse_mla_prefill_kernel"
"# Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)"
"0x7f00","USETMAXREG.DEALLOC.CTAPOOL 0x78 ;","1","0"
"0x7f10","SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [UR4+0x361f0], R14 ;","1,200","100"
"0x7f20","USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0x100 ;","2","1"
"0x7f30","WARPGROUP.DEPBAR.LE gsb0, 0x0 ;","300","290"
"0x7f40","@!P1 BRA `(.L_x_20) ;","5","2"
'''


def test_stalls_by_instruction_partition_and_opcode(tmp_path, capsys):
    path = tmp_path / "src.csv"
    path.write_text(CSV)
    assert ncu_stalls.main([str(path), "--top", "2"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("5 instructions, 1508 samples (Warp Stall Sampling (All Samples))")
    assert "0x7f10" in lines[1] and "after setmaxnreg 120" in lines[1] and lines[1].strip().startswith("79.58%")
    assert "0x7f30" in lines[2] and "after setmaxnreg 256" in lines[2]
    assert "BRA" in out.split("-- by opcode")[1]


def test_unknown_format_prints_what_it_found(tmp_path, capsys):
    path = tmp_path / "odd.csv"
    path.write_text('"Name","Value"\n"x","1"\n')
    assert ncu_stalls.main([str(path)]) == 1
    assert "no address column" in capsys.readouterr().out
