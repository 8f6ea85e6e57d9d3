"""Whether the classifier can read a question: the script it is written in, and what it names.

The classifier fine-tunes an English MiniLM encoder on data in six languages written in the Latin script (English,
French, Spanish, German, Italian, Portuguese). On other scripts (Chinese, Arabic, Devanagari, Cyrillic, Greek, Thai,
Hebrew...) it reads subword pieces it never learned, and its scores stop separating attacks from ordinary questions: on
a set of everyday and operations questions in fifteen other languages (`bench/corpora/question_multilingual.jsonl`)
it blocked a third of those in other scripts, and no threshold kept its attacks while letting them through (README:
Security hardening). Yet an attack in any language has to name what it is after (the instructions, the system prompt,
a password, a key, the configuration, a file under /etc) or what it overrides, and a harmful request names its harm
(a bomb, a drug, hacking, suicide). So a question mostly in another script is left to the classifier only when it
names one of those, in its language or in English; the rules, the suffix layer and decoding read it as before. Text
in the Latin script (other Latin-script languages included, where the classifier does better) is the classifier's
as before.

:func:`in_latin_script` says which side of that line a text is on; :func:`names_a_target` looks the text up in a
lexicon of targets, overrides and harms in the languages the data lacks. Both are pure and linear in the text.
"""
from __future__ import annotations

import re
import unicodedata

__all__ = ["in_latin_script", "names_a_target"]


def in_latin_script(text: str) -> bool:
    """Whether at least half of ``text``'s letters are Latin (a text without letters counts as Latin)."""
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return True
    return sum(1 for c in letters if "LATIN" in unicodedata.name(c, "")) >= 0.5 * len(letters)


def _folded(text: str) -> str:
    """Lowercase, Latin/Greek/Cyrillic accents removed (ş→s, ό→ο, й→и), dotless i and barred l as plain letters.
    Marks of the Indic, Thai and Arabic scripts are letters' parts there and stay."""
    out = []
    for ch in unicodedata.normalize("NFKD", text.lower()):
        if unicodedata.combining(ch) and out and ord(out[-1]) < 0x0530:
            continue
        out.append(ch)
    return "".join(out).replace("ı", "i").replace("ł", "l").replace("ø", "o").replace("ß", "ss")


# What an attack is after, what it overrides, and the harms a harmful request names (weapons, hacking, fraud, drugs,
# harassment, self-harm, hate, violence). Only text mostly in other scripts is looked up: English words are here for
# the technical terms such text keeps in English. Cyrillic and Greek words match at a word's start, folded; the other
# scripts attach particles to words or write no spaces, so their words match anywhere. Words common in ordinary
# questions ("system", "medicine", the Korean for "total") are left out: the lexicon decides only what the classifier
# may read, not what it blocks.
_STEMS = """
prompt instruction rule restriction filter guardrail password passwd passphrase api key token secret credential
config setting env environment /etc/ shadow .ssh ssh root admin sudo jailbreak dan unrestricted uncensored unfiltered
persona pretend roleplay role-play ignore disregard bypass override hack malware virus ransomware keylogger exploit
bomb explosive weapon gun rifle poison kill murder meth cocaine heroin fentanyl drug steal fraud scam phishing
suicide self-harm hate censor ddos
инструкц указани правил огранич фильтр промпт парол ключ токен секрет учетн обліков конфиг конфігур настро налаштув
переменн змінн игнорир игнор ігнор забуд администратор адміністратор роль притвор вдава цензур обмеж
бомб взрыв вибух оруж збро пистолет гранат патрон отрав отрут убит убей убив вбит вбий вбив
наркот метамф амфетам кокаин кокаїн героин героїн марихуан маріхуан каннабис канабіс фентанил фентаніл
взлом злам хакн хакер вирус вірус троян шифровальщ вимагач кейлогер кейлоггер
мошен шахра поддел підроб фальшив фишинг фішинг обман
угрож погрож запуга заляк травл цькув шантаж преслед переслід унизи принизи
суицид самоуб самогуб покончить покінчити порезат поріз навредить нашкод
ненавис неполноцен
οδηγι κανον περιορισμ κωδικ συνθηματικ κλειδι ρυθμισ μεταβλητ αγνοησ ξεχασ διαχειριστ ρολο λογοκρισ
βομβ εκρηκτικ οπλ οπλο πιστολ χειροβομβιδ δηλητηρ σκοτω φονο ναρκωτικ μεθαμφεταμιν κοκαιν ηρωιν καναβ
χακ παραβιασ λυτρισμικ κακοβουλ απατ πλαστογραφ εξαπατ ψαρεμα απειλ εκφοβισ παρενοχλ εκβιασ ταπειν
αυτοκτον αυτοτραυματ μισο κατωτερ
"""
_UNSPACED = """
提示 指令 指示 规则 規則 限制 过滤 過濾 密码 密碼 密钥 密鑰 令牌 凭证 憑證 配置 设置 設定 环境变量 環境變數 忽略 无视 無視 忘记 忘記
管理员 管理員 越狱 越獄 角色 扮演 审查 審查
炸弹 炸彈 炸药 炸藥 爆炸 武器 枪 槍 手榴弹 弹药 毒药 毒藥 下毒 杀 殺 毒品 冰毒 甲基苯丙胺 可卡因 海洛因 大麻 芬太尼 黑客 駭客 入侵 破解
盗号 盜號 木马 木馬 恶意软件 勒索 病毒 诈骗 詐騙 骗 騙 伪造 偽造 假冒 钓鱼网站 威胁 威脅 恐吓 恐嚇 骚扰 騷擾 霸凌 跟踪 跟蹤 勒索
自杀 自殺 自残 自殘 割腕 仇恨 歧视 劣等
プロンプト ルール 命令 フィルター パスワード キー トークン 認証 環境変数 忘れ 管理者 脱獄 ふり 検閲
爆弾 爆発 銃 手榴弾 毒殺 殺 麻薬 覚醒剤 覚せい剤 コカイン ヘロイン 大麻 フェンタニル ハッキング ハック 不正アクセス 乗っ取 クラック
マルウェア ウイルス ランサム キーロガー 詐欺 偽造 フィッシング 脅迫 脅し 嫌がらせ いじめ ストーカー つきまと 自傷 死にたい 差別 劣等
คำสั่ง คำแนะนำ ข้อจำกัด รหัสผ่าน คีย์ โทเค็น การตั้งค่า ตัวแปร เพิกเฉย ละเว้น ผู้ดูแล บทบาท เซ็นเซอร์ พรอมต์
ระเบิด อาวุธ ปืน ยาพิษ วางยา ฆ่า ยาเสพติด ยาบ้า ไอซ์ โคเคน เฮโรอีน กัญชา แฮ็ก แฮก เจาะระบบ มัลแวร์ ไวรัส หลอกลวง ปลอม ฟิชชิ่ง
ข่มขู่ ขู่ คุกคาม กลั่นแกล้ง แบล็กเมล์ ฆ่าตัวตาย ทำร้ายตัวเอง เกลียด
프롬프트 지시 지침 명령 규칙 제한 필터 비밀번호 암호 토큰 설정 환경 변수 무시 잊 관리자 탈옥 역할 검열
폭탄 폭발물 무기 총기 수류탄 독약 독살 죽이 살해 마약 필로폰 메스암페타민 코카인 헤로인 대마 펜타닐 해킹 해커 악성 랜섬 키로거
바이러스 사기 위조 피싱 협박 괴롭히 스토킹 스토커 자해 자살 혐오 열등
تعليمات قواعد قيود المرور السر مفتاح إعدادات اعدادات متغيرات تجاهل تظاهر الرقابة برومبت قانون
قنبلة متفجرات سلاح بندقية مسدس ذخيرة رصاص سموم تسميم قتل مخدرات حشيش كوكايين هيروين ميثامفيتامين كبتاغون اختراق تهكير
فيروس برمجيات خبيثة فدية احتيال تزوير مزور تصيد تهديد ابتزاز تحرش تنمر مطاردة انتحار ايذاء إيذاء أؤذي كراهية
دستورالعمل دستورات قوانین محدودیت گذرواژه کلید توکن تنظیمات متغیرهای نادیده فراموش مدیر نقش پرامپت سانسور
بمب منفجره اسلحه سلاح تفنگ نارنجک مهمات کشتن مخدر کوکائین هروئین ماریجوانا هک نفوذ بدافزار ویروس باج
کلاهبرداری جعل فریب فیشینگ تهدید اخاذی آزار زورگویی تعقیب خودکشی خودزنی نفرت
הוראות הנחיות כללים הגבלות סיסמ מפתח טוקן הגדרות משתני התעלם מנהל תפקיד פרומפט צנזור
פצצה נשק אקדח רובה רימון נפץ רעל להרוג לרצוח סמים קוקאין הרואין קנאביס לפרוץ פריצה האקר וירוס כופר הונאה זיוף מזויף
פישינג איום לאיים להפחיד הטרד סחיטה התאבדות לפגוע בעצמי שנאה נחות
निर्देश नियम प्रतिबंध पासवर्ड कुंजी टोकन सेटिंग कॉन्फ़िगरेशन कॉन्फिगरेशन अनदेखा नजरअंदाज एडमिन भूमिका प्रॉम्प्ट प्रोम्प्ट
पाबंदी सेंसर बम हथियार बंदूक पिस्तौल विस्फोटक ज़हर जहर मारने हत्या ड्रग्स नशील कोकीन हेरोइन गांजा हैक वायरस फिरौती धोखाधड़ी
जालसाज़ी जालसाजी नकली फ़िशिंग फिशिंग धमकी ब्लैकमेल आत्महत्या नफरत घृणा
নির্দেশ নিয়ম সীমাবদ্ধতা পাসওয়ার্ড টোকেন সেটিং কনফিগারেশন উপেক্ষা ভুলে অ্যাডমিন ভূমিকা প্রম্পট সেন্সর
বোমা অস্ত্র বন্দুক বিস্ফোরক বিষ হত্যা মাদক ইয়াবা কোকেন হেরোইন গাঁজা হ্যাক ভাইরাস প্রতারণা ফিশিং হুমকি ব্ল্যাকমেইল
হয়রানি আত্মহত্যা ঘৃণা
"""
_WORD_START = r"(?<![\w\u0900-\u0dff])"
_SPACED = re.compile(_WORD_START + "(?:" + "|".join(
    re.escape(_folded(s)) for s in sorted(set(_STEMS.split()), key=len, reverse=True)) + ")")
_ANYWHERE = re.compile("|".join(re.escape(s) for s in sorted(set(_UNSPACED.split()), key=len, reverse=True)))


def names_a_target(text: str) -> bool:
    """Whether ``text`` names something an attack is after or overrides, or a harm, in any language the lexicon
    holds (English included: mixed text keeps its technical words in English)."""
    folded = _folded(text)
    return _SPACED.search(folded) is not None or _ANYWHERE.search(text) is not None
