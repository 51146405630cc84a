# The fake NVIDIA device plugin as an image, for the kind backend (`gpu-lab up --backend kind`
# builds it as gpu-lab/fake-device-plugin:<version>, context: this folder).
FROM python:3.11-slim
WORKDIR /src
COPY pyproject.toml README.md ./
COPY gpu_lab ./gpu_lab
# The plugin never imports numpy or pandas (gpu_lab loads them lazily), so they stay out.
# The gRPC stubs are generated once here instead of at every start.
RUN python -c "import re, tomllib; deps = tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']; print('\n'.join(d for d in deps if re.split(r'[<>=!~; \[]', d)[0] not in ('numpy', 'pandas')))" > /tmp/requirements.txt \
 && pip install --no-cache-dir -r /tmp/requirements.txt \
 && pip install --no-cache-dir --no-deps . \
 && cd / && rm -rf /src /tmp/requirements.txt \
 && python -m gpu_lab.deviceplugin.stubs \
 && gpu-lab device-plugin --help > /dev/null
WORKDIR /
ENV PYTHONUNBUFFERED=1
ENTRYPOINT ["gpu-lab", "device-plugin"]
