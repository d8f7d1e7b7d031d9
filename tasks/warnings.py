"""Warning classes of ldpsim: computable configurations that lie outside the theory."""


class LDPSimWarning(RuntimeWarning):
    """Base class of every warning ldpsim emits."""


class OutsideTheoryWarning(LDPSimWarning):
    """A configuration is computable but outside the range where the theory applies.

    Examples: a step-size exponent ``gamma`` outside (1/2, 1), or a bootstrap block
    exponent ``beta <= gamma`` (Dette & Graw need ``gamma < beta``).
    """
