"""Opens .pptx files with python-pptx and prints what they hold, as JSON: the independent check
that agentry's decks are real PowerPoint files.  usage: pptx_inspect.py DECK..."""
import json
import sys

from pptx import Presentation
from pptx.enum.shapes import MSO_SHAPE_TYPE

out = []
for path in sys.argv[1:]:
    prs = Presentation(path)
    slides = []
    for s in prs.slides:
        title = s.shapes.title.text_frame.text if s.shapes.title is not None else None
        texts = []
        for sh in s.placeholders:
            if sh.placeholder_format.idx != 0 and sh.has_text_frame:
                texts.extend(p.text for p in sh.text_frame.paragraphs if p.text)
        pictures = [sh for sh in s.shapes if sh.shape_type == MSO_SHAPE_TYPE.PICTURE]
        notes = s.notes_slide.notes_text_frame.text if s.has_notes_slide else ""
        slides.append({
            "layout": s.slide_layout.name,
            "title": title,
            "texts": texts,
            "notes": notes,
            "pictures": [{"width": p.width, "height": p.height, "type": p.image.content_type} for p in pictures],
        })
    out.append({"path": path, "title": prs.core_properties.title, "slide_width": prs.slide_width, "slides": slides})
print(json.dumps(out))
