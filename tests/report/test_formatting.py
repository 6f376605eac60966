"""Numbers and labels a person reads: money without exponents or '$-', scatter labels that do not collide."""
from trnsim.report.charts import label_positions
from trnsim.report.tables import money


def test_money_reads_like_money():
    assert money(-0.006287) == "-$0.00629"
    assert money(9.4e-05) == "$0.0000940"
    assert money(0) == "$0.00"
    assert money(1.5) == "$1.50"
    assert money(123456.7) == "$123,457"
    assert money(-250) == "-$250"


def test_close_points_get_different_label_sides():
    # p5 and p5en sit 2 % apart on both axes; the far point keeps the default side
    pos = label_positions([10.0, 10.2, 30.0], [5.0, 5.1, 20.0])
    assert pos[0] != pos[1]
    assert pos[2] == "top center"
    # three points on top of each other: three different sides
    assert len(set(label_positions([1.0, 1.0, 1.0], [2.0, 2.0, 2.0]))) == 3
