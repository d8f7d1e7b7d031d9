#!/usr/bin/env bash

#PBS -N dask-worker
#PBS -q workq
#PBS -l select=1:ncpus=1:mem=954MB
#PBS -l walltime=01:00:00
#PBS -e LOG_DIRECTORY/
#PBS -o LOG_DIRECTORY/
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
PYTHON -m distributed.cli.dask_worker tcp://SCHEDULER:PORT --name NAME --nthreads 1 --memory-limit 0.93GiB --nanny --death-timeout 120 --local-directory /tmp --lifetime 55m --lifetime-stagger 4m --interface lo
