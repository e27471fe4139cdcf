"""What each variable of a run or a sweep (an xarray Dataset) means: its CF ``long_name`` and ``units``, set on
the Dataset a sweep returns and on every saved run (:mod:`flowsim.io`)."""

CONVENTIONS = "CF-1.10"
#: long_name and units of every variable a run or a sweep holds
VARIABLES = {
    "log10_t": ("log10 of the flow's time t at each save (a solve's state at t = 0: the *_init variables)", "1"),
    "beta": ("linear predictor beta_j = f(w_1j, ..., w_Kj)", "1"),
    "params": ("parameter entries w_kj", "1"),
    "log_loss": ("natural log of the mean training loss", "1"),
    "margins": ("margin y_i <x_i, beta> of each sample", "1"),
    "tau": ("loss-normalised clock tau (dtau = q dt), or the schedule clock s of sign/Adam-type flows", "1"),
    "X": ("training inputs x_i", "1"),
    "y": ("training labels y_i", "1"),
    "coordinate": ("coordinate j (1-based, as in the papers)", "1"),
    "sample": ("sample i (1-based)", "1"),
    "layer": ("layer name", ""),
    "leader": ("leading coordinate argmax_j |beta_j| (1-based; 0 after the solve ended)", "1"),
    "status": ("how the solve at this grid point ended (flowsim.STATUSES)", ""),
    "steps": ("solver steps taken", "1"),
    "log10_t_end": ("log10 t where the solve ended", "1"),
    "beta_end": ("beta at the end of the solve", "1"),
    "solver": ("the backend the point's solve ended on ('(vmap)': the sweep's lockstep solve)", ""),
    "params_init": ("parameter entries w_kj at t = 0 (the init)", "1"),
    "beta_init": ("linear predictor beta_j at t = 0 (the init)", "1"),
    "log_loss_init": ("natural log of the mean training loss at t = 0 (the init)", "1"),
    "margins_init": ("margin y_i <x_i, beta> of each sample at t = 0 (the init)", "1"),
    "alpha": ("initialisation scale alpha (every entry)", "1"),
    "rho": ("perturbation radius rho", "1"),
}


def annotate(ds):
    """Give every known variable its ``long_name`` and ``units`` and the dataset its ``Conventions``."""
    for name in list(ds.variables):
        long_name, units = VARIABLES.get(name) or (
            (f"initialisation of coordinate {name[6:]} (alpha_j)", "1") if str(name).startswith("alpha_") else (None, None))
        if long_name is not None:
            ds[name].attrs.update(long_name=long_name, units=units)
    ds.attrs["Conventions"] = CONVENTIONS
    return ds
