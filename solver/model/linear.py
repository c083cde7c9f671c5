"""Linear expressions and constraints for PuLP models, built in one step.

PuLP's operators (`a + b`, `c * x`, `lpSum`) copy an expression at every step; in the relaxation and the MILP,
whose rows have many terms, that copying was most of the time spent building a model. These build each row once
from (coefficient, item) pairs. The rows are the same as the operators would give.
"""
from __future__ import annotations

from collections.abc import Iterable

import pulp

Item = pulp.LpVariable | pulp.LpAffineExpression | int | float
Term = tuple[float, Item]


def affine(terms: Iterable[Term]) -> pulp.LpAffineExpression:
    """sum(coefficient * item), as one expression (numbers among the items go to its constant)."""
    coefficients: dict[pulp.LpVariable, float] = {}
    constant = 0.0
    for coefficient, item in terms:
        if isinstance(item, pulp.LpVariable):
            coefficients[item] = coefficients.get(item, 0) + coefficient
        elif isinstance(item, pulp.LpAffineExpression):
            for variable, inner in item.items():
                coefficients[variable] = coefficients.get(variable, 0) + coefficient * inner
            constant += coefficient * item.constant
        else:
            constant += coefficient * item
    return pulp.LpAffineExpression(coefficients, constant)


def at_most(terms: Iterable[Term], bound: float, name: str) -> pulp.LpConstraint:
    """sum(coefficient * item) <= bound."""
    return pulp.LpConstraint(affine(terms), pulp.LpConstraintLE, name, bound)


def at_least(terms: Iterable[Term], bound: float, name: str) -> pulp.LpConstraint:
    """sum(coefficient * item) >= bound."""
    return pulp.LpConstraint(affine(terms), pulp.LpConstraintGE, name, bound)


def equal(terms: Iterable[Term], value: float, name: str) -> pulp.LpConstraint:
    """sum(coefficient * item) == value."""
    return pulp.LpConstraint(affine(terms), pulp.LpConstraintEQ, name, value)
